"""Each handoff goes to its own destination: the default one (whatever its name), or the one its rule
version's step names; a compensation to the destination of the step it reverses; settlement and a person's
reconcile ask the handoff's own destination; the dispatcher serves every enabled destination."""

import pytest
from django.core.management import call_command
from django.test import override_settings

from approvals.errors import InvalidPayload
from approvals.management.commands.demo import ONBOARDING_STEPS, ONBOARDING_THREE_STEPS_SCHEMA
from approvals.rules import steps_problems
from approvals.services import rule_version_publish
from delivery.models import ReceiverTask
from outbox.destinations.registry import DestinationUnavailable, destination_named
from outbox.dispatch.dispatcher import drain, settle_uncertain, sweep
from outbox.models import DestinationConfig, Handoff, HandoffKind, HandoffState
from outbox.selectors import instance_handoffs
from outbox.services import handoff_settle, instance_compensate
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, make_request, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
# Step 1 to the CRM, step 2 to the accounts system, step 3 (no destination named) to the default one.
ROUTED_STEPS = [
    {**ONBOARDING_STEPS[0], "destination": "crm"},
    {**ONBOARDING_STEPS[1], "destination": "accounts"},
    ONBOARDING_STEPS[2],
]


@pytest.fixture
def world():
    return onboarding_world()


@pytest.fixture
def routed(world):
    """Two more in-process destinations and the three-step onboarding routed over them."""
    for name in ("crm", "accounts"):
        DestinationConfig.objects.create(name=name, kind="in_process", config={})
    rule_version_publish(
        workflow="onboarding",
        schema=ONBOARDING_THREE_STEPS_SCHEMA,
        steps=ROUTED_STEPS,
        actor=None,
        notes="routed",
    )
    return world


def approve_43(world, payload: dict) -> Handoff:
    from approvals.services import request_approve

    request = make_request(world["w7"], 43, world["bob"], payload=payload)
    return request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )


def test_a_default_destination_of_another_name_gets_the_handoff_and_delivers_it(world, settings):
    # Observed: with HANDOFF_DESTINATION_NAME=crm new handoffs kept the model default "receiver" and waited.
    with override_settings(HANDOFF_DESTINATION={**settings.HANDOFF_DESTINATION, "name": "crm"}):
        handoff = approve(world)
        assert handoff.destination == "crm"
        call_command("dispatch", "--once")
        handoff.refresh_from_db()
    assert handoff.state == S.DELIVERED
    assert ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).exists()


def test_each_step_goes_to_the_destination_its_rule_version_names(routed):
    first = approve_43(routed, dict(ONBOARDING_PAYLOAD))
    assert first.destination == "crm"
    drain()  # every enabled destination, as the django-q2 task does
    steps = instance_handoffs("onboarding:7:43:1")
    assert [(h.step, h.destination, h.state) for h in steps] == [
        ("create_client", "crm", S.DELIVERED),
        ("provision_account", "accounts", S.DELIVERED),
        ("send_welcome_pack", "receiver", S.DELIVERED),
    ]


def test_a_compensation_goes_to_the_destination_of_the_step_it_reverses(routed):
    # No contact e-mail: the receiver refuses step 3 for good; steps 2 and 1 are then reversed.
    payload = {k: v for k, v in ONBOARDING_PAYLOAD.items() if k != "contact_email"}
    approve_43(routed, payload)
    drain()
    instance_compensate(instance_key="onboarding:7:43:1", actor=routed["alice"], reason="refused")
    drain()
    compensations = [
        h for h in instance_handoffs("onboarding:7:43:1") if h.kind == HandoffKind.COMPENSATION
    ]
    assert sorted((h.compensates.destination, h.destination, h.state) for h in compensations) == [
        ("accounts", "accounts", S.DELIVERED),
        ("crm", "crm", S.DELIVERED),
    ]


def test_settlement_asks_the_handoffs_own_destination(routed):
    first = approve_43(routed, dict(ONBOARDING_PAYLOAD))
    drain()
    Handoff.objects.filter(pk=first.pk).update(state=S.UNCERTAIN)
    DestinationConfig.objects.filter(name="crm").update(enabled=False)
    # Its destination is disabled: a person's reconcile is refused by name, not sent to the default one.
    with pytest.raises(DestinationUnavailable, match="'crm' is disabled"):
        handoff_settle(handoff_id=first.pk, actor=routed["alice"])
    DestinationConfig.objects.filter(name="crm").update(enabled=True)
    assert handoff_settle(handoff_id=first.pk, actor=routed["alice"]) == S.DELIVERED


def test_sweep_settles_each_destinations_uncertain_outcomes(routed):
    first = approve_43(routed, dict(ONBOARDING_PAYLOAD))
    drain()
    Handoff.objects.filter(pk=first.pk).update(state=S.UNCERTAIN)
    stats = sweep()
    first.refresh_from_db()
    assert first.state == S.DELIVERED and stats.settled == {S.DELIVERED: 1}


def test_publishing_refuses_a_step_to_a_destination_that_is_not_served(world):
    DestinationConfig.objects.create(name="off", kind="in_process", config={}, enabled=False)
    steps = [
        {"name": "create_client", "destination": "nowhere"},
        {"name": "b", "destination": "off"},
    ]
    with pytest.raises(InvalidPayload) as refused:
        rule_version_publish(
            workflow="onboarding", schema=ONBOARDING_THREE_STEPS_SCHEMA, steps=steps, actor=None
        )
    assert [reason.split(" is ")[0] for reason in refused.value.reasons] == [
        "step 1 destination 'nowhere'",
        "step 2 destination 'off'",
    ]


def test_a_step_destination_must_be_a_destination_name():
    assert steps_problems([{"name": "a", "destination": "Not A Name"}]) == [
        "step 1 destination must be lowercase letters, digits, _ and - "
        "(at most 40, starting with a letter or digit)"
    ]
    assert steps_problems([{"name": "a", "destination": "crm-eu_2"}]) == []


def test_settlement_of_a_destination_asks_it_about_its_own_handoffs_only(routed):
    first = approve_43(routed, dict(ONBOARDING_PAYLOAD))
    drain()
    Handoff.objects.filter(pk=first.pk).update(state=S.UNCERTAIN)
    # The default destination's pass leaves the CRM's handoff alone (it is not the one to ask)...
    assert settle_uncertain(destination=destination_named("receiver")) == {}
    assert Handoff.objects.get(pk=first.pk).state == S.UNCERTAIN
    # ...the CRM's own pass settles it.
    assert settle_uncertain(destination=destination_named("crm")) == {S.DELIVERED: 1}


def test_a_destination_that_cannot_be_built_holds_up_no_other_in_a_sweep(world):
    DestinationConfig.objects.create(name="fax", kind="fax_machine", config={})
    handoff = approve(world)
    sweep()
    handoff.refresh_from_db()
    assert handoff.state == S.DELIVERED
