"""A three-step onboarding across three destinations, each on its own contract and a real server: the client
created at the bundled receiver (kind `http`), the account provisioned at a ledger API on the Idempotency-Key
draft (kind `idempotency_key_http`), the welcome pack sent by e-mail (kind `smtp`). With an answer lost after
the commit at each, every key has exactly one effect where it went; a workflow whose last step fails for good
is compensated in reverse order, each compensation at the destination of the step it reverses, exactly
once even when its answer is lost. The history names each destination. Both backends, every write
committed (the receiver answers from the live server's thread)."""

import pytest

from outbox.destinations.registry import default_destination_name, destination_named
from outbox.models import (
    Attempt,
    AttemptOutcome,
    CompensationState,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffKind,
    HandoffState,
)
from outbox.selectors import instance_handoffs, instance_status
from outbox.services import handoff_settle_manually, instance_compensate
from reconciliation.models import Finding
from reconciliation.services import reconciliation_run
from tests.acceptance.three_destinations import (
    ACCOUNTS,
    CRM,
    MAIL,
    approve,
    drive,
    instance_key,
    paused_destinations,
    step_key,
    three_destinations,
)
from tests.factories import three_step_onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState


@pytest.fixture
def world():
    return three_step_onboarding_world()


@pytest.fixture
def servers(world, live_server, settings, monkeypatch, tmp_path):
    with three_destinations(
        live_server=live_server, settings=settings, monkeypatch=monkeypatch, directory=tmp_path
    ) as servers:
        yield servers


def attempts_of(handoff: Handoff) -> list[str]:
    return list(
        Attempt.objects.filter(handoff=handoff).order_by("number").values_list("outcome", flat=True)
    )


def test_a_lost_answer_at_each_of_three_destinations_leaves_one_effect_per_key(world, servers):
    create, provision, welcome = (
        step_key(50, step) for step in ("create_client", "provision_account", "send_welcome_pack")
    )
    servers.lose_receiver_answer(create)
    servers.ledger.faults(drop_answer_for=[provision])
    servers.mailbox.faults(
        data_end="drop"
    )  # the message is kept, the answer to its data never comes

    first = approve(world, 50)
    assert (first.action_key, first.destination) == (create, CRM)
    drive()
    steps = instance_handoffs(instance_key(50))
    assert [(h.action_key, h.destination, h.state) for h in steps] == [
        (create, CRM, S.DELIVERED),
        (provision, ACCOUNTS, S.DELIVERED),
        (welcome, MAIL, S.NEEDS_ATTENTION),
    ]
    # The receiver and the ledger committed before their answers were lost: each was asked, not sent again.
    assert [attempts_of(h) for h in steps[:2]] == [["uncertain"], ["uncertain"]]
    assert {h.receipt["found_by"] for h in steps[:2]} == {"lookup"}
    [task_id] = servers.receiver_task_ids(create)
    assert steps[0].destination_id == task_id
    [entry] = servers.ledger_entries(provision)
    assert steps[1].destination_id == entry["ref"] and servers.ledger_creates(provision) == 1

    # SMTP has no idempotency and no lookup: the lost answer goes to a person with the evidence.
    lost = steps[2]
    assert (lost.failure_class, lost.reason_code) == (
        FailureClass.UNCERTAIN,
        "uncertain_not_idempotent",
    )
    assert lost.awaits_receiver_check and lost.manual_settle_applies
    servers.mailbox.faults()
    drive()  # nothing automatic sends it again
    assert Handoff.objects.get(pk=lost.pk).state == S.NEEDS_ATTENTION
    [message] = servers.messages(welcome)
    assert message["Message-ID"] == destination_named(MAIL).message_id(welcome)

    # The person finds it in the mailbox by its Message-ID and settles the step by hand.
    handoff_settle_manually(
        handoff_id=lost.pk,
        actor=world["olga"],
        receiver_task_id=message["Message-ID"],
        reason="found in the mailbox by its Message-ID",
    )
    drive()
    steps = instance_handoffs(instance_key(50))
    assert {h.state for h in steps} == {S.DELIVERED}
    assert steps[2].destination_id == message["Message-ID"]
    assert attempts_of(steps[2]) == [AttemptOutcome.UNCERTAIN]
    # Exactly one effect per key, each where its step went.
    assert servers.receiver_tasks(create) == 1
    assert len(servers.ledger_entries(provision)) == 1
    assert len(servers.messages(welcome)) == 1 and len(servers.mailbox.messages()) == 1
    assert [r["key"] for r in servers.ledger.creates()] == [provision]
    assert servers.receiver_tasks(provision) == servers.receiver_tasks(welcome) == 0
    assert paused_destinations() == []
    # The history: each step's row names its destination (above), and its events and attempts say what
    # that destination answered or held (its own id for the effect, the SMTP server and the Message-ID).
    assert history(steps[0])[-1] == f"crm has task {task_id} for this key with the same payload"
    assert (
        history(steps[1])[-1]
        == f"accounts has task {entry['ref']} for this key with the same payload"
    )
    for step, destination in zip(steps, ("crm", "accounts", "welcome-mail"), strict=True):
        assert f"claimed for attempt 1 at {destination}" in history(step)
    [attempt] = Attempt.objects.filter(handoff=steps[2])
    local_part = message["Message-ID"].strip("<>").split("@")[0]
    assert f"127.0.0.1:{servers.mailbox.port}" in attempt.detail and local_part in attempt.detail
    settled = HandoffEvent.objects.filter(handoff=steps[2]).latest("pk")
    assert (settled.actor, settled.action, settled.to_state) == (
        world["olga"],
        "manual_repair",
        S.DELIVERED,
    )


def history(handoff: Handoff) -> list[str]:
    """Its events' reasons, in order."""
    events = HandoffEvent.objects.filter(handoff=handoff).order_by("pk")
    return list(events.values_list("reason", flat=True))


def test_a_failed_last_step_is_compensated_at_each_reversed_steps_destination_exactly_once(
    world, servers
):
    number = 51
    create, provision, welcome = (
        step_key(number, step)
        for step in ("create_client", "provision_account", "send_welcome_pack")
    )
    # No contact e-mail: the welcome pack has no recipient, a permanent failure of step 3 alone.
    approve(world, number, without=("contact_email",))
    drive()
    steps = instance_handoffs(instance_key(number))
    assert [(h.destination, h.state) for h in steps] == [
        (CRM, S.DELIVERED),
        (ACCOUNTS, S.DELIVERED),
        (MAIL, S.NEEDS_ATTENTION),
    ]
    assert steps[2].failure_class == FailureClass.PERMANENT
    assert servers.mailbox.messages() == []

    plan = instance_compensate(
        instance_key=instance_key(number), actor=world["olga"], reason="no contact e-mail"
    )
    assert [h.step for h in plan.reverse] == ["provision_account", "create_client"]
    undo_provision, undo_create = f"{provision}:compensate", f"{create}:compensate"
    ref = steps[1].destination_id
    # The ledger removes the account's entry and its answer is lost: the lookup finds no entry under the
    # compensation's own key, so the same DELETE goes again with that key; the entry is gone (404), which is
    # what the undo wanted.
    servers.ledger.faults(drop_answer_for=[undo_provision])
    drive()

    handoffs = instance_handoffs(instance_key(number))
    compensations = [h for h in handoffs if h.kind == HandoffKind.COMPENSATION]
    assert [(h.action_key, h.destination, h.state) for h in compensations] == [
        (undo_provision, ACCOUNTS, S.DELIVERED),
        (undo_create, CRM, S.DELIVERED),
    ]
    assert [h.compensates.destination for h in compensations] == [ACCOUNTS, CRM]
    assert attempts_of(compensations[0]) == ["uncertain", "duplicate"], (
        "the second DELETE found it gone"
    )
    assert compensations[0].destination_id == ref
    assert compensations[0].receipt["undoes"] == {"action_key": provision, "receipt_id": ref}
    # Reverse order: the client's removal is recorded only once the account's is known to be delivered.
    removed = HandoffEvent.objects.get(handoff=compensations[0], to_state=S.DELIVERED)
    recorded = HandoffEvent.objects.get(handoff=compensations[1], from_state="")
    assert recorded.pk > removed.pk
    # Counted at the ledger: one create (the step's), never a second for the undo; the configured DELETE of
    # the step's entry under the compensation's key, and no entry left for the step's key.
    assert [r["key"] for r in servers.ledger.creates()] == [provision]
    assert [(r["path"], r["key"]) for r in servers.ledger.deletes()] == [
        (f"/v2/ledger/entries/{ref}", undo_provision)
    ] * 2
    assert servers.ledger_entries(provision) == [] and servers.ledger_entries(undo_provision) == []
    assert servers.receiver_tasks(undo_create) == 1 and servers.receiver_tasks(create) == 1
    assert servers.receiver_tasks(undo_provision) == 0
    assert servers.ledger_entries(undo_create) == [] and servers.mailbox.messages() == []
    reversed_steps = [h for h in handoffs if h.step in ("create_client", "provision_account")]
    assert {h.compensation_state for h in reversed_steps if h.kind == HandoffKind.ACTION} == {
        CompensationState.COMPENSATED
    }
    assert Handoff.objects.get(action_key=welcome).reason_code == "compensated"
    assert instance_status(handoffs) == "compensated"


def test_a_full_reconciliation_run_compares_each_destination_with_its_own_handoffs(world, servers):
    """The receiver's listing holds only the steps sent to it: the steps delivered to the ledger and by
    e-mail are not "missing" there (they were, when every handoff was compared with the default's list)."""
    approve(world, 51)
    drive()
    steps = instance_handoffs(instance_key(51))
    assert {h.state for h in steps} == {S.DELIVERED}

    run = reconciliation_run(trigger="test")
    assert run.status == "completed"
    assert list(Finding.objects.values_list("kind", "action_key")) == []
    compared = Handoff.objects.filter(destination=default_destination_name()).count()
    assert run.source_keys == compared, (
        "only the handoffs sent to the listed destination are compared"
    )
