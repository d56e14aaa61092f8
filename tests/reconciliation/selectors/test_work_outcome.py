"""work_outcome: the three owners' answers for a handoff, side by side."""

import pytest
from django.utils import timezone

from delivery.services import task_status_set
from outbox.models import Handoff, HandoffState
from reconciliation.selectors.work_outcome import work_outcome
from reconciliation.services.runs import reconciliation_run
from tests.builders import deliver, record
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def answers(handoff: Handoff) -> list[tuple[str, str]]:
    return [(a.question, a.value) for a in work_outcome(handoff)]


def test_recorded_handoff_is_approved_with_no_task_and_no_work_yet(world):
    outcome = work_outcome(record(42))
    assert [(a.question, a.value) for a in outcome] == [
        ("Approved?", "yes"),
        ("Task created?", "no"),
        ("Work done?", "no"),
    ]
    assert [a.owner for a in outcome] == [
        "source application",
        "receiving application",
        "people doing the task",
    ]
    assert outcome.approved.detail == "request 42 revision 1 approved under onboarding-v1"
    assert not outcome.complete


def test_delivered_handoff_has_a_task_whose_work_is_open(world):
    handoff = deliver(record(42))
    outcome = work_outcome(handoff)
    assert answers(handoff) == [
        ("Approved?", "yes"),
        ("Task created?", "yes"),
        ("Work done?", "no"),
    ]
    assert outcome.task_created.detail == f"task {handoff.destination_id} (receipt validated)"
    assert handoff.receipt["task_id"] == handoff.destination_id
    assert outcome.work_done.detail == "task open"
    assert not outcome.complete


def test_work_reported_done_completes_the_outcome(world):
    handoff = deliver(record(42))
    task_status_set(action_key=handoff.action_key, status="done")
    reconciliation_run()
    outcome = work_outcome(Handoff.objects.get(pk=handoff.pk))
    assert outcome.work_done.value == "yes"
    assert outcome.work_done.detail.startswith("the receiver reports the task done (as of ")
    assert outcome.complete


def test_work_reported_failed_is_failed_not_done(world):
    handoff = deliver(record(42))
    task_status_set(action_key=handoff.action_key, status="failed")
    reconciliation_run()
    outcome = work_outcome(Handoff.objects.get(pk=handoff.pk))
    assert (outcome.work_done.value, outcome.work_done.label) == ("failed", "failed")
    assert not outcome.complete


def test_delivered_handoff_without_a_reported_status_says_not_reported_yet():
    handoff = HandoffFactory(
        state=S.DELIVERED, destination_id="t-1", delivered_at=timezone.now(), work_status=""
    )
    outcome = work_outcome(handoff)
    assert (outcome.work_done.value, outcome.work_done.label) == (
        "not_reported",
        "not reported yet",
    )
    assert outcome.task_created.value == "yes"


def test_uncertain_handoff_does_not_know_whether_a_task_exists():
    outcome = work_outcome(HandoffFactory(state=S.UNCERTAIN))
    assert (outcome.task_created.value, outcome.work_done.value) == ("unknown", "no")


def test_work_outcome_reads_no_database(world, django_assert_num_queries):
    handoff = deliver(record(42))
    with django_assert_num_queries(0):
        list(work_outcome(handoff))
