"""Issue 35, items 1 and 2, against the ledger API written for the tests (a process of its own): an undo is
never a second create (a configured undo request, or a residual for a person where there is none), a lookup
compares only the fields that were sent, and an uncertain outcome at a destination that replays the original
answer to the same key is settled, and advised, by sending again with that key. Counted at the ledger."""

import pytest
from django.contrib.auth import get_user_model

from approvals.errors import InvalidPayload
from approvals.management.commands.demo import ONBOARDING_THREE_STEPS_SCHEMA
from approvals.services import request_approve, rule_version_publish
from approvals.services.erasure import subject_erase, subject_named
from delivery.models import ReceiverTask
from outbox.destinations.registry import destination_named
from outbox.dispatch.dispatcher import dispatch_batch, drain, settle_uncertain
from outbox.failures import Outgoing, UndoTarget
from outbox.guidance import available_actions, next_step, retry_is_risky
from outbox.models import (
    CompensationState,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffKind,
    HandoffState,
)
from outbox.payloads import payload_hash
from outbox.selectors import instance_handoffs, instance_status
from outbox.services import handoff_retry, instance_compensate
from outbox.services.destination_configs import destination_configs_apply
from tests.factories import (
    ONBOARDING_PAYLOAD,
    HandoffFactory,
    make_request,
    make_user,
    onboarding_world,
)
from tests.outbox.destinations.idempotency_key_server import LedgerProcess
from tests.outbox.destinations.test_idempotency_key_http import (
    KEY,
    NAME,
    TOKEN,
    attempt_outcomes,
    ledger_config,
    stored,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
INSTANCE = "onboarding:7:43:1"
STEP_KEY = f"{INSTANCE}:provision_account"
UNDO_KEY = f"{STEP_KEY}:compensate"
DELETE_ENTRY = {"method": "DELETE", "path": "/v2/ledger/entries/{receipt_id}"}


@pytest.fixture
def ledger(monkeypatch):
    monkeypatch.setenv("HANDOFF_DEST_LEDGER_CLIENT_TOKEN", TOKEN)
    server = LedgerProcess(token=TOKEN)
    try:
        server.wait_until_up()
        yield server
    finally:
        server.stop()


def ledger_row(ledger: LedgerProcess, **overrides):
    """The ledger as a destination row (as `manage.py destinations apply` writes it), and the destination."""
    destination_configs_apply(
        document={"destinations": [ledger_config(ledger.url, **overrides)]},
        actor_label="manage.py destinations",
    )
    return destination_named(NAME)


def account_workflow(world, *, step_extra: dict | None = None) -> None:
    rule_version_publish(
        workflow="onboarding",
        schema=ONBOARDING_THREE_STEPS_SCHEMA,
        steps=[
            {
                "name": "provision_account",
                "compensation": "deprovision_account",
                "destination": NAME,
                **(step_extra or {}),
            }
        ],
        actor=world["rules_admin"],
        notes="one account step at the ledger",
    )


@pytest.fixture
def world():
    world = onboarding_world()
    world["rules_admin"] = get_user_model().objects.create_superuser(
        "rules-admin", password="x-long-enough-pw"
    )
    return world


def approve_43(world, payload: dict) -> None:
    """Bob's request 43 with `payload`, approved by alice."""
    request = make_request(world["w7"], 43, world["bob"], payload=dict(payload))
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )


def delivered_account_step(world, destination, payload: dict = ONBOARDING_PAYLOAD) -> Handoff:
    approve_43(world, payload)
    dispatch_batch(destination=destination)
    step = Handoff.objects.get(action_key=STEP_KEY)
    assert step.state == S.DELIVERED
    return step


def test_a_compensation_sends_the_configured_delete_and_the_ledger_holds_no_entry_for_the_key(
    ledger, world
):
    destination = ledger_row(ledger, undo=DELETE_ENTRY)
    account_workflow(world)
    step = delivered_account_step(world, destination)
    assert len(ledger.entries()) == 1

    plan = instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client left")
    assert [h.action_key for h in plan.reverse] == [STEP_KEY] and plan.residual == []
    dispatch_batch(destination=destination)

    undo = Handoff.objects.get(action_key=UNDO_KEY)
    assert (undo.kind, undo.state) == (HandoffKind.COMPENSATION, S.DELIVERED)
    assert stored(step).compensation_state == CompensationState.COMPENSATED
    # Counted at the ledger: the step's one create, the DELETE of its entry under the compensation's own key.
    assert [r["key"] for r in ledger.creates()] == [STEP_KEY], "never a second create"
    assert [(r["path"], r["key"]) for r in ledger.deletes()] == [
        (f"/v2/ledger/entries/{step.destination_id}", UNDO_KEY)
    ]
    assert [e for e in ledger.entries() if e["request_key"] == STEP_KEY] == []
    assert ledger.entries() == []
    assert instance_status(instance_handoffs(INSTANCE)) == "compensated"


def test_without_an_undo_nothing_is_sent_and_a_person_gets_the_residual_naming_receipt_and_key(
    ledger, world
):
    destination = ledger_row(ledger)
    account_workflow(world, step_extra={"undo": "manual"})
    step = delivered_account_step(world, destination)

    plan = instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client left")
    dispatch_batch(destination=destination)

    assert plan.reverse == [] and [h.pk for h in plan.residual] == [step.pk]
    reason = plan.residual_reason(step)
    assert step.destination_id in reason and STEP_KEY in reason and NAME in reason
    assert not Handoff.objects.filter(kind=HandoffKind.COMPENSATION).exists()
    assert stored(step).compensation_state == CompensationState.RESIDUAL
    marked = HandoffEvent.objects.filter(handoff=step, action="compensate").latest("pk")
    assert step.destination_id in marked.reason and STEP_KEY in marked.reason
    assert instance_status(instance_handoffs(INSTANCE)) == "needs a person"
    assert [r["key"] for r in ledger.creates()] == [STEP_KEY]
    assert ledger.deletes() == [] and len(ledger.entries()) == 1


def test_a_compensation_planned_before_the_undo_was_removed_sends_nothing(ledger):
    destination = ledger_row(ledger)
    step_payload = {**ONBOARDING_PAYLOAD, "operation": "deprovision_account"}
    result = destination.deliver(
        Outgoing(
            action_key=UNDO_KEY,
            payload=step_payload,
            payload_hash=payload_hash(step_payload),
            undo=UndoTarget(action_key=STEP_KEY, receipt_id="le_1"),
        )
    )
    assert (result.delivered, result.failure_class, result.reason_code) == (
        False,
        FailureClass.PERMANENT,
        "no_undo",
    )
    assert "le_1" in result.detail and STEP_KEY in result.detail
    assert ledger.state()["requests"] == []


# Request 43's client: another than request 42's, which awaits a decision (an erasure would be refused).
CLIENT_43 = {
    **ONBOARDING_PAYLOAD,
    "client_name": "Lakeside Bakery",
    "contact_email": "owner@lakeside.example",
}


def _erased_and_compensated(world):
    """The subject of request 43 erased on request once its steps were delivered, then the instance
    compensated; the plan."""
    eraser = make_user("erin", permissions=["outbox.erase_personal_data"])
    subject_erase(
        subject=subject_named(email=CLIENT_43["contact_email"]),
        reason="ticket 4711",
        actor=eraser,
    )
    return instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client left")


def test_after_an_erasure_an_undo_by_receipt_id_is_sent_and_a_native_undo_is_a_residual(
    ledger, world
):
    """Compensation after an erasure: the step at the ledger is undone by a DELETE naming only its receipt
    id (it carries none of the erased fields), while the step at the receiver, whose undo is a task holding
    the whole payload, would send "[erased]" where the client's data was: a residual for a person, nothing
    sent."""
    ledger_row(ledger, undo=DELETE_ENTRY)
    rule_version_publish(
        workflow="onboarding",
        schema=ONBOARDING_THREE_STEPS_SCHEMA,
        steps=[
            {"name": "create_client", "compensation": "delete_client"},
            {
                "name": "provision_account",
                "compensation": "deprovision_account",
                "destination": NAME,
            },
        ],
        actor=world["rules_admin"],
        notes="a client at the receiver, its account at the ledger",
    )
    approve_43(world, CLIENT_43)
    drain()
    client = Handoff.objects.get(action_key=f"{INSTANCE}:create_client", state=S.DELIVERED)
    account = Handoff.objects.get(action_key=STEP_KEY, state=S.DELIVERED)

    plan = _erased_and_compensated(world)
    drain()

    assert [h.pk for h in plan.reverse] == [account.pk]
    assert [h.pk for h in plan.residual] == [client.pk]
    reason = plan.residual_reason(client)
    assert "erased on request" in reason and "client_name, contact_email" in reason
    assert client.destination_id in reason and client.action_key in reason
    assert stored(client).compensation_state == CompensationState.RESIDUAL
    assert stored(account).compensation_state == CompensationState.COMPENSATED
    assert [(r["path"], r["key"]) for r in ledger.deletes()] == [
        (f"/v2/ledger/entries/{account.destination_id}", UNDO_KEY)
    ]
    assert not ReceiverTask.objects.filter(action_key__endswith=":compensate").exists()
    assert not Handoff.objects.filter(compensates=client).exists()


def test_after_an_erasure_an_undo_request_naming_an_erased_field_is_a_residual_nothing_sent(
    ledger, world
):
    undo = {
        **DELETE_ENTRY,
        "body": {"contact": "{payload.contact_email}", "plan": "{payload.plan}"},
    }
    destination = ledger_row(ledger, undo=undo)
    account_workflow(world)
    step = delivered_account_step(world, destination, CLIENT_43)

    plan = _erased_and_compensated(world)
    dispatch_batch(destination=destination)

    assert plan.reverse == [] and [h.pk for h in plan.residual] == [step.pk]
    reason = plan.residual_reason(step)
    assert "would send [erased] for contact_email;" in reason and step.destination_id in reason
    assert not Handoff.objects.filter(kind=HandoffKind.COMPENSATION).exists()
    assert ledger.deletes() == [] and len(ledger.entries()) == 1


def test_publishing_a_compensation_at_a_destination_without_undo_is_refused_naming_step_and_destination(
    ledger, world
):
    ledger_row(ledger)
    with pytest.raises(InvalidPayload) as refused:
        account_workflow(world)
    assert "step 1 (provision_account)" in str(refused.value)
    assert f"destination {NAME!r} has no undo" in str(refused.value)
    account_workflow(world, step_extra={"undo": "manual"})  # said so: published


def test_an_answer_with_the_providers_own_fields_settles_a_lost_answer_as_delivered(ledger):
    destination = ledger_row(ledger)
    handoff = HandoffFactory(number=42, destination=NAME)
    ledger.faults(provider_fields=True, drop_answer_for=[KEY])
    dispatch_batch(destination=destination)
    assert stored(handoff).state == S.UNCERTAIN
    [entry] = ledger.entries()
    assert {"id", "object", "created"} <= set(entry["body"])

    assert settle_uncertain(destination=destination) == {S.DELIVERED: 1}
    after = stored(handoff)
    assert (after.state, after.destination_id) == (S.DELIVERED, entry["ref"])
    assert after.receipt["found_by"] == "lookup"
    assert [r["key"] for r in ledger.creates()] == [KEY]


def test_a_receipt_with_the_providers_own_fields_is_a_delivery(ledger):
    destination = ledger_row(ledger)
    handoff = HandoffFactory(number=42, destination=NAME)
    ledger.faults(provider_fields=True)
    dispatch_batch(destination=destination)
    assert stored(handoff).state == S.DELIVERED
    assert attempt_outcomes(handoff) == ["created"]


def test_another_value_of_a_sent_field_stays_a_conflict(ledger):
    destination = ledger_row(ledger)
    ledger.faults(provider_fields=True)
    created = destination.deliver(
        Outgoing(
            action_key=KEY,
            payload=ONBOARDING_PAYLOAD,
            payload_hash=payload_hash(ONBOARDING_PAYLOAD),
        )
    )
    assert created.delivered
    changed = {**ONBOARDING_PAYLOAD, "plan": "premium"}
    handoff = HandoffFactory(
        number=42,
        destination=NAME,
        state=S.UNCERTAIN,
        payload=changed,
        payload_hash=payload_hash(changed),
    )
    settle_uncertain(destination=destination)
    after = stored(handoff)
    assert (after.state, after.failure_class) == (S.NEEDS_ATTENTION, FailureClass.CONFLICT)
    assert [r["key"] for r in ledger.creates()] == [KEY]


def test_the_advice_for_an_unknown_outcome_at_a_replaying_destination_is_the_same_key_resend(
    ledger,
):
    ledger_row(ledger)
    handoff = HandoffFactory(number=42, destination=NAME, state=S.UNCERTAIN)
    guidance = next_step(handoff)
    assert guidance.headline == "Outcome unknown: send again with the same key (safe)."
    assert guidance.recommended == "retry" and "retry" not in guidance.avoid
    assert not retry_is_risky(handoff)
    assert available_actions(handoff)[0] == "retry"


def test_the_advice_where_the_destination_does_not_replay_stays_reconcile_first(ledger):
    ledger_row(ledger, replays_same_key=False)
    handoff = HandoffFactory(number=42, destination=NAME, state=S.UNCERTAIN)
    assert next_step(handoff).recommended == "reconcile"
    assert retry_is_risky(handoff)


def test_a_person_sends_an_unknown_outcome_again_without_confirming_a_risk(ledger, world):
    destination = ledger_row(ledger)
    handoff = HandoffFactory(number=42, destination=NAME)
    ledger.faults(drop_answer_for=[KEY])
    dispatch_batch(destination=destination)
    assert stored(handoff).state == S.UNCERTAIN
    handoff_retry(handoff_id=handoff.pk, actor=world["olga"])
    dispatch_batch(destination=destination)
    assert stored(handoff).state == S.DELIVERED
    assert [r["key"] for r in ledger.creates()] == [KEY, KEY] and len(ledger.entries()) == 1


def test_without_a_lookup_a_replaying_destination_settles_by_sending_again(ledger):
    destination = ledger_row(ledger, lookup=None)
    handoff = HandoffFactory(number=42, destination=NAME)
    ledger.faults(drop_answer_for=[KEY])
    dispatch_batch(destination=destination)
    assert stored(handoff).state == S.UNCERTAIN

    assert settle_uncertain(destination=destination) == {S.PENDING: 1}
    dispatch_batch(destination=destination)
    after = stored(handoff)
    assert after.state == S.DELIVERED
    assert attempt_outcomes(handoff) == ["uncertain", "duplicate"]
    assert [r["key"] for r in ledger.creates()] == [KEY, KEY] and len(ledger.entries()) == 1
