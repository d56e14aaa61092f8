"""The requester's status lines (`console/request_status.py`, `console/step_status.py`, read by
`console/request_evidence.py`): one line per request and per step, each derived from that step's own handoff,
its compensation and its live findings, reached through the product's own services. Both backends."""

from datetime import UTC, datetime

import pytest

from approvals.models import Request, RequestState, Role
from approvals.services import request_approve, request_cancel, request_correct_by_approver
from console.evidence_words import WORKERS
from console.request_evidence import statuses_of
from console.selectors import requests_of
from delivery.models import ReceiverTask
from delivery.services import task_delete, task_status_set
from outbox.dispatch.dispatcher import drain
from outbox.hold_lines import destination_holds_now
from outbox.models import (
    Handoff,
    HandoffKind,
    HandoffState,
)
from outbox.services import instance_compensate
from outbox.services.destination_windows import destination_pause_by_operator
from outbox.services.status_events import (
    STATUS_CHANGED,
    TASK_DELETED,
    ReceiverStatement,
    handoff_record_status_event,
)
from reconciliation.services import reconciliation_run
from reconciliation.services.repairs import manual_repair_record
from tests.factories import (
    ONBOARDING_PAYLOAD,
    make_request,
    make_user,
    pause_by_breaker,
    three_step_onboarding_world,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
INSTANCE = "onboarding:7:43:1"


@pytest.fixture
def world():
    return three_step_onboarding_world()


def approved_43(world, payload: dict | None = None) -> Request:
    request = make_request(world["w7"], 43, world["bob"], payload=payload or ONBOARDING_PAYLOAD)
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    return Request.objects.select_related("corrected_by").get(pk=request.pk)


def status_of(request: Request):
    return statuses_of([Request.objects.select_related("corrected_by").get(pk=request.pk)])[
        request.pk
    ]


def tones(status) -> list[str]:
    return [line.tone for line in status.steps]


def test_a_compensated_failed_last_step_is_undone_and_no_line_claims_the_compensation_as_a_yes(
    world,
):
    # No contact e-mail: the receiver refuses the welcome pack; the two delivered steps are compensated.
    payload = {k: v for k, v in ONBOARDING_PAYLOAD.items() if k != "contact_email"}
    request = approved_43(world, payload)
    drain()
    instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client withdrew")
    assert drain().delivered == 2
    status = status_of(request)
    undo = Handoff.objects.get(action_key=f"{INSTANCE}:create_client:compensate")
    step = Handoff.objects.get(action_key=f"{INSTANCE}:create_client")

    assert status.headline.tone == "no" and "undone: its delivered steps were reversed" in (
        status.headline.text
    )
    assert tones(status) == ["no", "no", "no"], "nothing of a reversed workflow is a green yes"
    first = status.steps[0]
    assert first.label == "Step 1 of 3: create_client"
    assert first.text.startswith(f"reversed: task {step.destination_id[:8]}… confirmed by the")
    assert f"its compensation, task {undo.destination_id[:8]}…" in first.text
    assert status.steps[2].text.startswith("cancelled before it was sent, by olga at")
    assert "client withdrew" in status.steps[2].text


def test_the_newest_handoff_is_not_taken_for_the_request_the_compensation_row_is_newest(world):
    """The cause of the false "yes: receiver task …": the request's status was read from its newest handoff,
    which after a compensation is the compensation."""
    payload = {k: v for k, v in ONBOARDING_PAYLOAD.items() if k != "contact_email"}
    request = approved_43(world, payload)
    drain()
    instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client withdrew")
    drain()
    newest = Handoff.objects.filter(source_id=request.pk).order_by("-id").first()
    assert newest.kind == HandoffKind.COMPENSATION
    (row,) = [r for r in requests_of(world["bob"]) if r.pk == request.pk]
    assert all(
        newest.destination_id[:8] not in line.text.split("its compensation")[0]
        for line in row.status.steps
    )


def test_work_failed_at_the_receiver_is_stuck_with_an_operator_not_task_open(world):
    request = approved_43(world)
    assert drain().delivered == 3
    task_status_set(action_key=f"{INSTANCE}:create_client", status="failed")
    reconciliation_run()
    status = status_of(request)
    assert tones(status) == ["stuck", "waiting", "waiting"]
    assert status.steps[0].text.startswith("failed at the receiver: task ")
    assert status.steps[0].owner == "olga (operator)"
    assert status.headline.tone == "stuck"
    assert "stuck with an operator at step 1 of 3: create_client" in status.headline.text


def test_a_task_deleted_at_the_receiver_is_unknown_and_names_when_it_was_not_found(world):
    request = approved_43(world)
    drain()
    ReceiverTask.objects.filter(action_key=f"{INSTANCE}:provision_account").delete()
    reconciliation_run()
    status = status_of(request)
    line = status.steps[1]
    assert line.tone == "unknown"
    assert "but has none for this key now (reconciliation run" in line.text
    assert "may have been deleted there" in line.text
    assert status.headline.tone == "stuck"


def test_a_step_settled_by_a_repair_of_its_deleted_task_passes_the_request_to_the_next(world):
    """Step 1's task deleted at the receiver and a person's repair accounting for it: nothing more happens to
    step 1 (its owner is nobody), while steps 2 and 3 wait for the receiver's workers. The request is at step
    2 and its workers own its next step; it said "at step 1" and nobody (the oracle's fault run, seed
    541143022, look 8: the truth is the first step someone owns)."""
    request = approved_43(world)
    drain()
    first = Handoff.objects.get(action_key=f"{INSTANCE}:create_client")
    task_delete(action_key=first.action_key)
    reconciliation_run()
    manual_repair_record(actor=world["olga"], what_was_done="checked by hand", handoff_id=first.pk)
    status = status_of(request)
    assert tones(status) == ["no", "waiting", "waiting"]
    assert status.steps[0].owner == "" and "recorded a manual repair" in status.steps[0].text
    assert status.headline.owner == WORKERS == status.steps[1].owner
    assert "in progress at step 2 of 3: provision_account" in status.headline.text
    assert status.headline.owner_claim.value == "workers"


def test_every_step_done_is_the_only_green_request(world):
    request = approved_43(world)
    drain()
    for name in ("create_client", "provision_account", "send_welcome_pack"):
        task_status_set(action_key=f"{INSTANCE}:{name}", status="done")
    reconciliation_run()
    status = status_of(request)
    assert status.headline.tone == "yes" and tones(status) == ["yes", "yes", "yes"]
    assert "the receiver reports the work done (read at" in status.steps[2].text
    assert "approved by alice at" in status.headline.text


def test_a_step_refused_by_the_receiver_is_stuck_with_its_operator_and_later_steps_wait(world):
    payload = {k: v for k, v in ONBOARDING_PAYLOAD.items() if k != "contact_email"}
    request = approved_43(world, payload)
    drain()
    assert Handoff.objects.get(step="send_welcome_pack").state == HandoffState.NEEDS_ATTENTION
    status = status_of(request)
    line = status.steps[2]
    assert line.tone == "stuck" and line.text.startswith("stuck with an operator since")
    assert "Permanent" in line.text and line.owner == "olga (operator)"
    assert "retries it, corrects the request" in line.next


def test_steps_not_recorded_yet_are_named_from_the_plan(world):
    request = approved_43(world)
    status = status_of(request)
    assert [line.label for line in status.steps] == [
        "Step 1 of 3: create_client",
        "Step 2 of 3: provision_account",
        "Step 3 of 3: send_welcome_pack",
    ]
    assert status.steps[0].text == "being sent to receiver"
    assert status.steps[1].text.startswith("not started")


def test_a_request_cancelled_by_its_requester_says_by_whom_and_why(world):
    request_cancel(workspace_id=7, number=42, actor=world["bob"], reason="no longer needed")
    status = status_of(world["request"])
    assert status.headline.tone == "no" and status.steps == []
    assert status.headline.text.startswith("cancelled by bob at")
    assert status.headline.text.endswith(": no longer needed; nothing is sent")


def test_a_corrected_request_waits_for_another_approver_and_is_stuck_when_there_is_none(world):
    corrected = request_correct_by_approver(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
        edits={"plan": "enterprise"},
        reason="contract says enterprise",
    )
    alone = status_of(corrected).headline
    assert alone.tone == "stuck" and "nobody can approve it" in alone.text
    assert "alice corrected it and may not also approve it" in alone.text
    assert alone.owner == "the operators of workspace 7"

    make_user("dana", workspace=world["w7"], roles=(Role.APPROVER,))
    waiting = status_of(corrected).headline
    assert waiting.tone == "waiting"
    assert waiting.text.startswith("corrected by alice (an approver) at")
    assert waiting.owner == "the approvers who may decide it: dana"


def test_my_requests_reads_a_page_in_the_same_queries_whatever_it_holds(
    world, django_assert_max_num_queries
):
    for number in range(60, 66):
        approved = make_request(world["w7"], number, world["bob"])
        request_approve(
            workspace_id=7,
            number=number,
            revision=1,
            actor=world["alice"],
            payload_hash=approved.payload_hash,
        )
    drain()
    reconciliation_run()
    with django_assert_max_num_queries(8):
        rows = requests_of(world["bob"])
    assert len(rows) == 7 and all(r.status.steps for r in rows if r.state == RequestState.APPROVED)


def test_a_task_the_receiver_says_it_deleted_is_unknown_at_once_without_a_reconciliation_run(world):
    request = approved_43(world)
    drain()
    step = Handoff.objects.get(action_key=f"{INSTANCE}:create_client")
    handoff_record_status_event(
        destination="receiver",
        webhook_id="evt_1",
        statement=ReceiverStatement(
            kind=TASK_DELETED,
            action_key=step.action_key,
            task_id=step.destination_id,
            status="",
            sequence=1,
            occurred_at=datetime(2026, 12, 1, 16, 25, tzinfo=UTC),
        ),
    )
    line = status_of(request).steps[0]
    assert line.tone == "unknown"
    assert "but has none for this key now (status event from receiver, at" in line.text


def test_work_reported_by_a_status_event_names_the_receivers_own_time(world):
    request = approved_43(world)
    drain()
    step = Handoff.objects.get(action_key=f"{INSTANCE}:create_client")
    handoff_record_status_event(
        destination="receiver",
        webhook_id="evt_2",
        statement=ReceiverStatement(
            kind=STATUS_CHANGED,
            action_key=step.action_key,
            task_id=step.destination_id,
            status="done",
            sequence=1,
            occurred_at=datetime(2026, 11, 30, 16, 25, tzinfo=UTC),
        ),
    )
    line = status_of(request).steps[0]
    assert line.tone == "yes"
    assert "the receiver reports the work done (at 2026-11-30 16:25 UTC, its time; recorded" in (
        line.text
    )


def test_a_step_waiting_for_a_paused_destination_says_so_with_until_when_not_being_sent(world):
    request = approved_43(world)
    destination_pause_by_operator(
        name="receiver", actor=world["olga"], reason="receiver upgrade", for_seconds=600
    )
    line = status_of(request).steps[0]
    [hold] = destination_holds_now("receiver").live
    # The destination page's words (`outbox/hold_lines.py`): who, why, since and until when.
    assert line.text == f"not sent yet, waiting: receiver is held: {hold.words}"
    assert (
        "Paused by an operator: receiver upgrade · since " in line.text
        and "set by olga" in line.text
    )
    assert line.owner == "olga (operator)" and line.tone == "waiting"


def test_a_step_waiting_for_a_destination_its_breaker_paused_names_the_next_probe(world):
    request = approved_43(world)
    pause_by_breaker("receiver", detail="refused", next_probe_in=30)
    line = status_of(request).steps[0]
    assert line.text.startswith("not sent yet, waiting: receiver is held: Breaker pause: ")
    assert "consecutive failure(s): connect_failed: refused" in line.text
    assert "until a probe succeeds (next probe " in line.text
    assert line.next == "the system sends it once no hold on receiver is live"
    assert line.owner == "the system (its holds end by themselves)"
