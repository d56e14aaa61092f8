"""The truth oracle on the console's screens: after each kind of evidence (a receipt, a lookup after a lost
answer, a person's repair, a task deleted at the receiver, work reported failed and finished by hand) every
claim on every screen, for each role, is true; and the oracle fails when one claim's code is made to lie,
when a claim has no truth check, and when two screens disagree. The receiver is the real in-process one.
Both backends."""

from datetime import timedelta

import pytest
from django.utils import timezone

import console.evidence_words
from delivery.models import ReceiverTask
from delivery.services import task_delete, task_status_set
from incidents.services.incidents import incidents_sync
from outbox.clock import db_time
from outbox.destinations import InProcessDestination, LookupFailed
from outbox.dispatch.dispatcher import drain
from outbox.failures import DeliveryResult
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_resume_by_operator,
)
from outbox.services.operator import handoff_assign
from outbox.services.status_events import (
    TASK_DELETED,
    ReceiverStatement,
    handoff_record_status_event,
)
from outbox.settlement.asked import handoff_settle
from reconciliation.models import Finding, FindingKind
from reconciliation.services import reconciliation_run
from reconciliation.services.repairs import manual_repair_record
from tests.builders import approve
from tests.factories import make_request, pause_by_breaker, three_step_onboarding_world
from tests.oracle.oracle import CHECKS, assert_pages_true, check_pages, claims_in
from tests.oracle.screens import render_every_screen
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
LOST = DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout")


class NotAskable(InProcessDestination):
    """The real receiver, as a destination that cannot be asked about a key."""

    def __init__(self, name: str):
        super().__init__(supports_lookup=False)
        self.name = name

    def lookup(self, action_key):
        raise LookupFailed("this destination cannot be asked about a key")


class Unavailable(InProcessDestination):
    """A receiver that answers 503 before creating anything: the step waits in backoff."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def deliver(self, outgoing):
        return DeliveryResult.failed(FailureClass.TRANSIENT, "http_503")


class AnswerLost(InProcessDestination):
    """The real receiver creates the task; the answer that comes back is lost."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def deliver(self, outgoing):
        super().deliver(outgoing)
        return LOST


@pytest.fixture
def world():
    return three_step_onboarding_world()


def roles(world) -> dict:
    return {
        "requester": world["bob"],
        "approver": world["alice"],
        "operator": world["olga"],
        "support": world["rules_admin"],
    }


def first_step(number: int) -> Handoff:
    return Handoff.objects.get(action_key=f"onboarding:7:{number}:1:create_client")


def every_kind_of_evidence(world) -> dict[str, Handoff]:
    """Request 42 delivered with receipts, its work all done; 43's first answer lost and settled by lookup;
    44's task deleted at the receiver; 45's work failed, then finished by hand; 46 awaiting approval; 47
    approved, not sent yet; 48 answered 503, waiting to be tried again."""
    approve(world)
    drain()
    approve(world, 43)
    lost = first_step(43)
    drain(destination=AnswerLost(lost.destination))
    assert handoff_settle(handoff_id=lost.pk, actor=world["olga"]) == HandoffState.DELIVERED
    approve(world, 44)
    approve(world, 45)
    drain()
    gone = first_step(44)
    task_delete(action_key=gone.action_key)
    handoff_record_status_event(
        destination=gone.destination,
        webhook_id="evt_gone",
        statement=ReceiverStatement(
            kind=TASK_DELETED,
            action_key=gone.action_key,
            task_id=gone.destination_id,
            status="",
            sequence=1,
            occurred_at=timezone.now(),
        ),
    )
    failed = first_step(45)
    task_status_set(action_key=failed.action_key, status="failed")
    for step in Handoff.objects.filter(instance_key="onboarding:7:42:1"):
        task_status_set(action_key=step.action_key, status="done")
    reconciliation_run()
    finding = Finding.objects.get(action_key=failed.action_key, kind=FindingKind.WORK_FAILED)
    manual_repair_record(
        actor=world["olga"], what_was_done="finished the set-up by hand", finding_id=finding.pk
    )
    make_request(world["w7"], 46, world["bob"])
    approve(world, 48)
    drain(destination=Unavailable(first_step(48).destination))
    # The suite's backoff is a fraction of a second: the next try is put where a page still sees it.
    waiting = Handoff.objects.filter(pk=first_step(48).pk, state=HandoffState.PENDING)
    assert waiting.update(next_attempt_at=db_time() + timedelta(minutes=10)) == 1
    handoff_assign(handoff_id=first_step(48).pk, actor=world["olga"], owner=world["olga"])
    approve(world, 47)
    return {"lost": first_step(43), "gone": gone, "by_hand": failed}


def test_every_claim_of_every_screen_is_true_after_every_kind_of_evidence(world):
    chosen = every_kind_of_evidence(world)
    pages = render_every_screen(roles(world))
    checked = assert_pages_true(pages, Truth())
    seen = {(c.name, c.value) for url, html in pages.items() for c in claims_in(url, html)}
    # Each kind of evidence was stated somewhere, by a claim checked against the records.
    backoff = Handoff.objects.get(pk=first_step(48).pk)
    assert ("handoff.next_attempt_at", backoff.next_attempt_at.isoformat()) in seen
    for fact in [
        ("handoff.outcome_evidence", "lookup"),
        ("handoff.outcome_evidence", "receipt"),
        ("handoff.state", "task_gone"),
        ("handoff.task_at_receiver", "no"),
        ("handoff.work", "by_hand"),
        ("handoff.next_owner", "workers"),
        ("handoff.next_owner", "system"),
        ("request.next_owner", "approvers"),
        ("request.state", "awaiting_approval"),
        ("handoff.assignee", "olga"),
        ("health.pending", "2"),
        ("health.retry_exhausted", "0"),
        # 42's case is complete: its three steps' work reported done.
        ("health.cases_completed", "1"),
        ("health.work_failed", "1"),
        ("health.needs_attention", "0"),
    ]:
        assert fact in seen, fact
    assert checked > 50
    queue = [c for c in claims_in("q", pages["approver /approvals/"]) if c.name == "request.state"]
    assert queue and {c.value for c in queue} == {"awaiting_approval"}
    said_in_admin = [
        c for url, html in pages.items() for c in claims_in(url, html) if "/admin/" in url
    ]
    assert {c.name for c in said_in_admin} >= {"handoff.state", "request.state", "finding.status"}
    assert chosen["lost"].receipt["found_by"] == "lookup"


def test_the_oracle_fails_when_the_evidence_words_say_receipt_after_a_lookup(world, monkeypatch):
    chosen = every_kind_of_evidence(world)
    real = console.evidence_words.outcome_evidence

    def lying(handoff, repairs=()):
        said = real(handoff, repairs)
        return console.evidence_words.RECEIPT if said == console.evidence_words.LOOKUP else said

    monkeypatch.setattr(console.evidence_words, "outcome_evidence", lying)
    pages = render_every_screen(roles(world))
    problems, _ = check_pages(pages, Truth())
    subject = f"handoff:{chosen['lost'].pk}"
    lies = [p for p in problems if p.claim.subject == subject]
    assert lies, problems
    assert {p.claim.name for p in lies} == {"handoff.outcome_evidence"}
    assert all(p.truth == "lookup" and p.claim.value == "receipt" for p in lies)
    # The report names the screen and quotes the words that lied.
    assert any("receipt validated" in p.claim.words for p in lies)
    assert any(p.claim.url.startswith("operator /handoffs/") for p in lies)
    assert any(p.claim.url.startswith("requester /approvals/") for p in lies)
    with pytest.raises(AssertionError, match="handoff.outcome_evidence"):
        assert_pages_true(pages, Truth())


def test_the_oracle_fails_when_a_deleted_task_is_said_to_be_there(world, monkeypatch):
    chosen = every_kind_of_evidence(world)
    monkeypatch.setattr(console.evidence_words, "state_badge", lambda h: (h.state, "Delivered"))
    problems, _ = check_pages(render_every_screen(roles(world)), Truth())
    gone = f"handoff:{chosen['gone'].pk}"
    assert {
        (p.claim.name, p.claim.value, p.truth) for p in problems if p.claim.subject == gone
    } >= {("handoff.state", "delivered", "task_gone")}
    assert not ReceiverTask.objects.filter(action_key=chosen["gone"].action_key).exists()


def test_a_claim_without_a_truth_check_fails_and_so_do_two_screens_that_disagree(world):
    approve(world)
    drain()
    pk = first_step(42).pk
    pages = {
        "a": f'<p><span data-claim="handoff.colour" data-subject="handoff:{pk}" data-value="green">'
        "green</span></p>",
        "b": f'<span data-claim="handoff.state" data-subject="handoff:{pk}" data-value="delivered">'
        "Delivered</span>",
        "c": f'<span data-claim="handoff.state" data-subject="handoff:{pk}" data-value="pending">'
        "<b>Pending</b></span>",
    }
    problems, count = check_pages(pages, Truth())
    assert count == 3
    said = {(p.claim.url, p.claim.name, p.truth.split(":")[0]) for p in problems}
    assert ("a", "handoff.colour", "unknown") in said
    assert ("c", "handoff.state", "delivered or delivered") not in said
    assert any(p.claim.url == "c" and p.truth == "delivered" for p in problems)
    assert any(p.claim.words == "Pending" and "disagree" in p.truth for p in problems)
    assert "handoff.colour" not in CHECKS


def test_claims_about_paused_destinations_are_true_for_the_operator_and_the_requester(world):
    step = approve(world)
    destination_pause_by_operator(name=step.destination, actor=world["olga"], reason="upgrade")
    pages = render_every_screen(roles(world))
    assert_pages_true(pages, Truth())
    said = {(c.name, c.subject, c.value) for u, h in pages.items() for c in claims_in(u, h)}
    assert ("destination.state", f"destination:{step.destination}", "window") in said
    assert ("handoff.next_owner", f"handoff:{step.pk}", "operator") in said

    # The breaker pauses it instead: the system probes it, at the time the page names.
    destination_resume_by_operator(name=step.destination, actor=world["olga"], reason="done")
    probe = pause_by_breaker(step.destination, next_probe_in=600).next_probe_at
    incidents_sync()
    pages = render_every_screen(roles(world))
    assert_pages_true(pages, Truth())
    said = {(c.name, c.subject, c.value) for u, h in pages.items() for c in claims_in(u, h)}
    assert (
        "destination.next_probe_at",
        f"destination:{step.destination}",
        probe.isoformat(),
    ) in said
    assert ("destination.state", f"destination:{step.destination}", "breaker") in said
    assert any(name == "incident.state" and value == "open" for name, _, value in said)
    assert ("handoff.next_owner", f"handoff:{step.pk}", "system") in said


def test_a_step_settled_by_a_repair_whose_work_failed_says_so_in_its_words_too(world):
    """The step line of failed work words the task as its claim says it is known: settled by a person's
    repair, not "how it was learnt is not recorded" (the line asked without the repairs)."""
    approve(world)
    step = first_step(42)
    drain(destination=AnswerLost(step.destination))
    handoff_settle(handoff_id=step.pk, destination=NotAskable(step.destination))
    task = str(ReceiverTask.objects.get(action_key=step.action_key).task_id)
    manual_repair_record(
        actor=world["olga"],
        what_was_done="found the task by hand",
        receiver_task_id=task,
        handoff_id=step.pk,
    )
    task_status_set(action_key=step.action_key, status="failed")
    reconciliation_run()
    assert Finding.objects.filter(action_key=step.action_key, kind=FindingKind.WORK_FAILED).exists()
    pages = render_every_screen(roles(world))
    problems, _ = check_pages(pages, Truth())
    assert not problems, "\n".join(str(p) for p in problems)
    said = [
        c
        for u, h in pages.items()
        for c in claims_in(u, h)
        if c.subject == f"handoff:{step.pk}" and c.name == "handoff.outcome_evidence"
    ]
    assert any(c.url.startswith("requester ") and "failed at the receiver" in c.words for c in said)
