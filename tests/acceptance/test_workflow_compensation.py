"""A three-step onboarding: each step its own key, step n+1 recorded only when step n is delivered; when
step 3 fails for good, the operator compensates: steps 2 and 1 reversed in reverse order, each compensation
delivered exactly once even when its acknowledgement is lost; a step nothing can undo is a residual that a
manual repair closes. Both backends, every write committed."""

import pytest
from django.db.models import Count
from django.test import Client

from approvals.management.commands.demo import ONBOARDING_STEPS, ONBOARDING_THREE_STEPS_SCHEMA
from approvals.services import request_approve, rule_version_publish
from delivery.models import ReceiverTask
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import drain, sweep
from outbox.errors import CompensationBlocked
from outbox.models import (
    CompensationState,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffKind,
    HandoffState,
)
from outbox.selectors import instance_handoffs, instance_status
from outbox.services import handoff_cancel, handoff_residual_repaired, instance_compensate
from tests.factories import ONBOARDING_PAYLOAD, make_request, three_step_onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
INSTANCE = "onboarding:7:43:1"
# No contact e-mail: the receiver rejects the welcome pack (a permanent failure of step 3 only).
PAYLOAD = {key: value for key, value in ONBOARDING_PAYLOAD.items() if key != "contact_email"}


@pytest.fixture
def world():
    return three_step_onboarding_world()


def approve_43(world, payload=PAYLOAD) -> Handoff:
    request = make_request(world["w7"], 43, world["bob"], payload=payload)
    return request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )


def keys_in_order(instance: str) -> list[str]:
    return [h.action_key for h in instance_handoffs(instance)]


def test_three_steps_each_with_its_own_key_recorded_one_after_another(world):
    first = approve_43(world, payload=dict(ONBOARDING_PAYLOAD))
    assert first.action_key == f"{INSTANCE}:create_client"
    assert Handoff.objects.count() == 1, "step 2 is recorded only when step 1 is delivered"
    drain(destination=InProcessDestination())
    assert keys_in_order(INSTANCE) == [
        f"{INSTANCE}:create_client",
        f"{INSTANCE}:provision_account",
        f"{INSTANCE}:send_welcome_pack",
    ]
    steps = instance_handoffs(INSTANCE)
    assert {h.state for h in steps} == {S.DELIVERED}
    for earlier, later in zip(steps, steps[1:], strict=False):
        delivered = HandoffEvent.objects.get(handoff=earlier, to_state=S.DELIVERED)
        recorded = HandoffEvent.objects.get(handoff=later, from_state="")
        assert recorded.id > delivered.id, (
            "a step is never recorded before its predecessor is delivered"
        )
        assert f"recorded when {earlier.action_key} was delivered" == recorded.reason
    assert {t.payload["operation"] for t in ReceiverTask.objects.all()} == {
        s["name"] for s in ONBOARDING_STEPS
    }
    assert instance_status(steps) == "delivered, work not done yet"


def test_failed_last_step_is_compensated_in_reverse_order_exactly_once_despite_a_lost_ack(world):
    approve_43(world)
    drain(destination=InProcessDestination())
    steps = instance_handoffs(INSTANCE)
    assert [(h.step, h.state) for h in steps] == [
        ("create_client", S.DELIVERED),
        ("provision_account", S.DELIVERED),
        ("send_welcome_pack", S.NEEDS_ATTENTION),
    ]
    assert steps[2].failure_class == FailureClass.PERMANENT

    plan = instance_compensate(
        instance_key=INSTANCE, actor=world["olga"], reason="welcome pack cannot go out"
    )
    assert [h.step for h in plan.reverse] == ["provision_account", "create_client"]
    assert [h.step for h in plan.cancel] == ["send_welcome_pack"] and plan.residual == []
    compensations = Handoff.objects.filter(kind=HandoffKind.COMPENSATION)
    assert list(compensations.values_list("action_key", flat=True)) == [
        f"{INSTANCE}:provision_account:compensate"
    ]

    # The receiver commits the compensation of step 2 and its answer is lost: settled by lookup, not resent.
    lossy = InProcessDestination(lose_ack_for={f"{INSTANCE}:provision_account:compensate"})
    drain(destination=lossy)
    assert compensations.get().state == S.UNCERTAIN
    assert compensations.count() == 1, (
        "the next compensation waits until this one is known to be delivered"
    )
    sweep(destination=InProcessDestination())
    drain(destination=InProcessDestination())

    assert keys_in_order(INSTANCE)[3:] == [
        f"{INSTANCE}:provision_account:compensate",
        f"{INSTANCE}:create_client:compensate",
    ]
    assert set(compensations.values_list("state", flat=True)) == {S.DELIVERED}
    reversed_steps = Handoff.objects.filter(kind=HandoffKind.ACTION, state=S.DELIVERED)
    assert set(reversed_steps.values_list("compensation_state", flat=True)) == {
        CompensationState.COMPENSATED
    }
    assert Handoff.objects.get(step="send_welcome_pack").reason_code == "compensated"
    duplicates = ReceiverTask.objects.values("action_key").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicates.exists()
    assert ReceiverTask.objects.count() == 4, "two steps and their two compensations, one task each"
    assert instance_status(instance_handoffs(INSTANCE)) == "compensated"


def test_a_step_nothing_can_undo_is_a_residual_until_a_manual_repair_closes_it(world):
    rule_version_publish(
        workflow="onboarding",
        schema=ONBOARDING_THREE_STEPS_SCHEMA,
        actor=world["rules_admin"],
        notes="first step irreversible",
        steps=[{"name": "create_client"}, {"name": "send_welcome_pack"}],
    )
    approve_43(world)
    drain(destination=InProcessDestination())
    plan = instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="cannot welcome")
    [residual] = plan.residual
    assert plan.reverse == [] and residual.step == "create_client"
    assert Handoff.objects.filter(kind=HandoffKind.COMPENSATION).count() == 0
    assert instance_status(instance_handoffs(INSTANCE)) == "needs a person"
    handoff_residual_repaired(
        handoff_id=residual.pk,
        actor=world["olga"],
        reason="client record deleted by hand at the receiver",
    )
    assert Handoff.objects.get(pk=residual.pk).compensation_state == CompensationState.REPAIRED
    assert instance_status(instance_handoffs(INSTANCE)) == "compensated"


def test_an_instance_with_an_unknown_outcome_cannot_be_compensated(world):
    approve_43(world)
    drain(destination=InProcessDestination(lose_ack_for={f"{INSTANCE}:create_client"}))
    with pytest.raises(CompensationBlocked, match="settle it first"):
        instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="stop")
    assert Handoff.objects.filter(kind=HandoffKind.COMPENSATION).count() == 0


def test_the_operator_sees_the_steps_and_compensates_from_the_console(world):
    approve_43(world)
    drain(destination=InProcessDestination())
    failed = Handoff.objects.get(step="send_welcome_pack")
    client = Client()
    client.force_login(world["olga"])
    page = client.get(f"/handoffs/{failed.pk}/").content.decode()
    assert f"Workflow <code>{INSTANCE}</code>: needs a person" in page
    assert (
        "Reversed, in this order: <code>provision_account</code>, then <code>create_client</code>."
        in page
    )
    assert "Not sent yet, so cancelled: <code>send_welcome_pack</code>." in page
    refused = client.post(
        f"/handoffs/{failed.pk}/compensate", {"reason": " "}, HTTP_HX_REQUEST="true"
    )
    assert (
        refused.status_code == 422
        and not Handoff.objects.filter(kind=HandoffKind.COMPENSATION).exists()
    )
    done = client.post(
        f"/handoffs/{failed.pk}/compensate", {"reason": "client withdrew"}, HTTP_HX_REQUEST="true"
    )
    assert done.status_code == 200
    assert "reversing provision_account, create_client, latest first" in done.content.decode()
    drain(destination=InProcessDestination())
    assert instance_status(instance_handoffs(INSTANCE)) == "compensated"
    for user, status in (
        ("bob", 403),
        ("mallory", 404),
    ):  # a requester of workspace 7; another workspace
        other = Client()
        other.force_login(world[user])
        assert (
            other.post(f"/handoffs/{failed.pk}/compensate", {"reason": "x"}).status_code == status
        )


def test_the_request_page_shows_the_steps_as_a_timeline(world):
    approve_43(world)
    drain(destination=InProcessDestination())
    client = Client()
    client.force_login(world["olga"])
    page = client.get("/approvals/7/43/1/").content.decode()
    assert "stuck with an operator at step 3 of 3: send_welcome_pack" in page
    positions = [page.index(f"<code>{INSTANCE}:{step['name']}</code>") for step in ONBOARDING_STEPS]
    assert positions == sorted(positions), "the steps in their order"


def test_a_compensation_on_its_way_is_not_cancelled_alone(world):
    """Cancelling it would leave the step it reverses 'planned' for good and the workflow half reversed."""

    approve_43(world)
    drain(destination=InProcessDestination())
    instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client withdrew")
    compensation = Handoff.objects.get(kind=HandoffKind.COMPENSATION)
    with pytest.raises(CompensationBlocked, match="compensate the workflow instead"):
        handoff_cancel(handoff_id=compensation.pk, actor=world["olga"], reason="changed my mind")
    assert Handoff.objects.get(pk=compensation.pk).state == S.PENDING
