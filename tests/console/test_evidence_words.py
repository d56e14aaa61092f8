"""The evidence words (`console/evidence_words.py`): how a step's outcome is known, whether its task exists now,
the work, and who owns the next step, chosen from the evidence recorded and read the same on the requester's
lines and the operator's handoff page. Reached through the product's own services; the receiver is the real
in-process one (its answer lost on the way back where a test says so). Both backends."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from approvals.models import Request
from approvals.services import request_approve
from console.request_evidence import statuses_of
from delivery.models import ReceiverTask
from delivery.services import task_status_set
from outbox.destinations import InProcessDestination, LookupFailed
from outbox.dispatch.dispatcher import drain
from outbox.failures import DeliveryResult
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.services.status_events import (
    TASK_DELETED,
    ReceiverStatement,
    handoff_record_status_event,
)
from outbox.settlement.asked import handoff_settle
from reconciliation.models import Finding, FindingKind
from reconciliation.services import reconciliation_run
from reconciliation.services.repairs import manual_repair_record
from tests.console.clients import client_for
from tests.factories import make_request, three_step_onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
INSTANCE = "onboarding:7:43:1"
FIRST = f"{INSTANCE}:create_client"


@pytest.fixture
def world():
    return three_step_onboarding_world()


def approved_43(world) -> Request:
    request = make_request(world["w7"], 43, world["bob"])
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    return request


def bobs_first_line(request: Request):
    row = Request.objects.select_related("corrected_by").get(pk=request.pk)
    return statuses_of([row])[row.pk].steps[0]


def olgas_page(world, handoff: Handoff) -> str:
    response = client_for(world["olga"]).get(reverse("outbox:detail", args=[handoff.pk]))
    assert response.status_code == 200
    return response.content.decode()


class AnswerLost(InProcessDestination):
    """The real receiver creates the task; the answer that comes back is lost (a read timeout) or malformed."""

    def __init__(self, name: str, answer: DeliveryResult):
        super().__init__()
        self.name, self.answer, self.calls = name, answer, 0

    def deliver(self, outgoing):
        self.calls += 1
        super().deliver(outgoing)
        return self.answer


class NotAskable(InProcessDestination):
    """The real receiver, as a destination that cannot be asked about a key."""

    def __init__(self, name: str):
        super().__init__(supports_lookup=False)
        self.name = name

    def lookup(self, action_key):
        raise LookupFailed("this destination cannot be asked about a key")


@pytest.mark.parametrize(
    "answer",
    [
        DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "read timed out"),
        DeliveryResult.failed(
            FailureClass.MALFORMED,
            "malformed_receipt",
            "HTTP 200 without a valid receipt: receipt has no task_id",
        ),
    ],
    ids=["read_timeout", "malformed_receipt"],
)
def test_a_step_delivered_by_lookup_says_found_by_lookup_never_receipt_validated(world, answer):
    request = approved_43(world)
    step = Handoff.objects.get(action_key=FIRST)
    lost = AnswerLost(step.destination, answer)
    drain(destination=lost)
    assert lost.calls == 1
    step.refresh_from_db()
    assert step.state in (HandoffState.UNCERTAIN, HandoffState.NEEDS_ATTENTION)
    assert handoff_settle(handoff_id=step.pk, actor=world["olga"]) == HandoffState.DELIVERED
    step.refresh_from_db()
    page = olgas_page(world, step)
    summary = page.split('id="last-successful-step">')[1].split("</dd>")[0]
    outcome = page.split('id="handoff-outcome">')[1].split("</dd>")[0]
    assert "found by lookup" in summary and "receipt validated" not in summary
    assert "found by lookup" in outcome and "receipt validated" not in outcome
    line = bobs_first_line(request)
    assert "found by lookup" in line.text and "receipt validated" not in line.text


def test_a_malformed_receipt_settled_by_olgas_repair_says_settled_by_a_person(world):
    request = approved_43(world)
    step = Handoff.objects.get(action_key=FIRST)
    malformed = DeliveryResult.failed(
        FailureClass.MALFORMED, "malformed_receipt", "receipt has no task_id"
    )
    drain(destination=AnswerLost(step.destination, malformed))
    # The receiver cannot be asked about a key: the settlement hands the step to a person.
    handoff_settle(handoff_id=step.pk, destination=NotAskable(step.destination))
    task = str(ReceiverTask.objects.get(action_key=FIRST).task_id)
    manual_repair_record(
        actor=world["olga"],
        what_was_done="found the task at the receiver by hand",
        receiver_task_id=task,
        handoff_id=step.pk,
    )
    step.refresh_from_db()
    assert (step.state, step.destination_id) == (HandoffState.DELIVERED, task)
    page = olgas_page(world, step)
    summary = page.split('id="last-successful-step">')[1].split("</dd>")[0]
    said = page.split('id="evidence-task"')[1].split("</dd>")[0]
    assert "settled by a person" in summary and "receipt" not in summary
    assert "receipt" not in said and "manual repair" in said
    assert "settled by a person" in bobs_first_line(request).text


def test_a_deleted_task_is_not_green_delivered_at_the_top_of_the_page(world):
    approved_43(world)
    drain()
    step = Handoff.objects.get(action_key=FIRST)
    handoff_record_status_event(
        destination="receiver",
        webhook_id="evt_deleted",
        statement=ReceiverStatement(
            kind=TASK_DELETED,
            action_key=step.action_key,
            task_id=step.destination_id,
            status="",
            sequence=1,
            occurred_at=datetime(2026, 12, 1, 16, 25, tzinfo=UTC),
        ),
    )
    page = olgas_page(world, step)
    top = page.split("<dt>State</dt>")[1].split("</dd>")[0]
    assert 'class="state delivered"' not in top
    assert "the task is gone at the receiver" in top
    assert "not at the receiver now" in page.split('id="handoff-outcome">')[1].split("</dd>")[0]


def test_a_deleted_task_is_not_green_delivered_on_bobs_page_nor_in_the_lists(world):
    request = approved_43(world)
    drain()
    step = Handoff.objects.get(action_key=FIRST)
    handoff_record_status_event(
        destination="receiver",
        webhook_id="evt_deleted_2",
        statement=ReceiverStatement(
            kind=TASK_DELETED,
            action_key=step.action_key,
            task_id=step.destination_id,
            status="",
            sequence=1,
            occurred_at=datetime(2026, 12, 1, 16, 25, tzinfo=UTC),
        ),
    )
    bobs = client_for(world["bob"]).get(
        reverse("approvals:detail", args=[7, request.number, request.revision])
    )
    top = bobs.content.decode().split("<dt>Handoff</dt>")[1].split("</dd>")[0]
    assert 'class="state delivered"' not in top and "task gone at the receiver" in top
    steps = bobs.content.decode().split('id="request-steps"')[1].split("</table>")[0]
    first = steps.split(FIRST)[1].split("</tr>")[0]
    assert "task gone at the receiver" in first and ">open<" not in first
    listed = client_for(world["olga"]).get(reverse("outbox:list")).content.decode()
    row = listed.split(f'id="handoff-{step.pk}"')[1].split("</tr>")[0]
    assert 'class="state delivered"' not in row and "task gone at the receiver" in row


def test_a_deleted_task_a_repair_accounts_for_is_no_longer_stuck_with_olga(world):
    request = approved_43(world)
    drain()
    step = Handoff.objects.get(action_key=FIRST)
    handoff_record_status_event(
        destination="receiver",
        webhook_id="evt_deleted_3",
        statement=ReceiverStatement(
            kind=TASK_DELETED,
            action_key=step.action_key,
            task_id=step.destination_id,
            status="",
            sequence=1,
            occurred_at=datetime(2026, 12, 1, 16, 25, tzinfo=UTC),
        ),
    )
    assert bobs_first_line(request).tone == "unknown"
    manual_repair_record(
        actor=world["olga"],
        what_was_done="the client cancelled; nothing to re-create",
        handoff_id=step.pk,
    )
    line = bobs_first_line(request)
    assert line.tone == "no" and not line.owner
    assert (
        "task deleted at the receiver" in line.text and "olga recorded a manual repair" in line.text
    )
    row = Request.objects.select_related("corrected_by").get(pk=request.pk)
    headline = statuses_of([row])[row.pk].headline
    assert "stuck" not in headline.text and "olga" not in headline.owner


def test_work_finished_by_hand_after_a_failure_is_done_for_bob_and_olga(world):
    request = approved_43(world)
    assert drain().delivered == 3
    task_status_set(action_key=FIRST, status="failed")
    reconciliation_run()
    finding = Finding.objects.get(action_key=FIRST, kind=FindingKind.WORK_FAILED)
    manual_repair_record(
        actor=world["olga"],
        what_was_done="finished the client set-up by hand",
        finding_id=finding.pk,
    )
    line = bobs_first_line(request)
    assert line.tone == "yes" and "done by hand" in line.text and "olga" in line.text
    row = Request.objects.select_related("corrected_by").get(pk=request.pk)
    headline = statuses_of([row])[row.pk].headline
    assert "stuck" not in headline.text and headline.tone != "stuck"
    page = olgas_page(world, Handoff.objects.get(action_key=FIRST))
    outcome = page.split('id="handoff-outcome">')[1].split("</dd>")[0]
    assert "finished by hand" in outcome and "failed" not in outcome


def test_bob_and_olga_name_the_same_owner_of_an_uncertain_steps_next_step(world):
    request = approved_43(world)
    step = Handoff.objects.get(action_key=FIRST)
    drain(
        destination=AnswerLost(
            step.destination, DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout")
        )
    )
    step.refresh_from_db()
    assert step.state == HandoffState.UNCERTAIN
    bobs = bobs_first_line(request).owner
    page = olgas_page(world, step)
    assert f'id="next-step-owner">{bobs}<' in page
    # Neither the workflow's heading nor the advice hands the step to a person while the system owns it.
    assert bobs.startswith("the system")
    assert "needs a person" not in page
    assert "The next step is the system" in page.split('id="next-step"')[1].split("</div>")[0]
