"""Retention moves settled handoffs older than the retention age, and only those, out of the hot tables into
the archive, in bounded batches, and a second run changes nothing (both backends)."""

import re
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from incidents.models import Incident, IncidentMember
from outbox.models import (
    ArchivedHandoff,
    Attempt,
    CompensationState,
    Handoff,
    HandoffEvent,
    HandoffKind,
    HandoffState,
    StatusEvent,
)
from outbox.services import retention
from outbox.services.retention import handoffs_archive_settled, pause_after
from tests.builders import deliver, record
from tests.factories import FindingFactory, HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

S = HandoffState
OLD = timedelta(days=40)


def age(*handoffs, by: timedelta = OLD) -> None:
    """Move the handoffs' last change back by `by` (an update() writes no auto_now)."""
    Handoff.objects.filter(pk__in=[h.pk for h in handoffs]).update(updated_at=F("updated_at") - by)


def settled(n: int, state: str = S.DELIVERED, **fields) -> Handoff:
    return HandoffFactory(number=n, state=state, destination_id=f"task-{n}", **fields)


def archived_ids() -> set[int]:
    return set(ArchivedHandoff.objects.values_list("handoff_id", flat=True))


def test_only_settled_rows_older_than_the_age_and_needed_by_nobody_leave(settings):
    settings.HANDOFF_RETENTION_DAYS = 30
    delivered = deliver(record(1))
    cancelled, superseded = settled(2, S.CANCELLED), settled(3, S.SUPERSEDED)
    young = settled(4)
    open_ones = [
        settled(10 + i, state)
        for i, state in enumerate(
            (S.PENDING, S.IN_FLIGHT, S.UNCERTAIN, S.NEEDS_ATTENTION, S.OBSERVED)
        )
    ]
    work_open = settled(20, work_status="open")  # the receiver's business; late, a finding holds it
    work_failed = settled(21, work_status="failed")
    receiver_has_none = settled(22, task_seen=False)
    residual = settled(23, compensation_state=CompensationState.RESIDUAL)
    # A workflow whose second step still waits: its delivered first step stays with it.
    first_step = settled(30, instance_key="onboarding:7:30:1", step="create", step_index=0)
    settled(31, S.PENDING, instance_key="onboarding:7:30:1", step="welcome", step_index=1)
    with_finding = settled(40)
    FindingFactory(action_key=with_finding.action_key)
    in_incident = settled(41)
    incident = Incident.objects.create(cause="c", kind="handoff", severity="queue", title="t")
    IncidentMember.objects.create(
        incident=incident, member_key=f"handoff:{in_incident.pk}", handoff_id=in_incident.pk
    )
    age(*Handoff.objects.exclude(pk=young.pk))

    run = handoffs_archive_settled()

    assert archived_ids() == {delivered.pk, cancelled.pk, superseded.pk, work_open.pk}
    assert run.archived == 4
    assert run.held == 2  # the finding's and the incident's; the others are not even candidates
    kept = {young, *open_ones, work_failed, receiver_has_none, residual, first_step}
    assert {h.pk for h in kept} | {with_finding.pk, in_incident.pk} <= set(
        Handoff.objects.values_list("pk", flat=True)
    )
    assert not Handoff.objects.filter(pk__in=archived_ids()).exists()


def test_the_archive_row_keeps_what_search_and_reconciliation_need_and_the_history_goes_with_it():
    handoff = deliver(record(1))
    StatusEvent.objects.create(
        destination=handoff.destination,
        webhook_id="msg_1",
        kind="task.status",
        action_key=handoff.action_key,
        status="done",
        sequence=1,
        occurred_at=handoff.delivered_at,
        result="applied",
        handoff=handoff,
    )
    attempts = Attempt.objects.filter(handoff=handoff).count()
    # In the archive's order (`_histories`): a list without ORDER BY is the heap's order on PostgreSQL.
    events = list(
        HandoffEvent.objects.filter(handoff=handoff)
        .order_by("at", "id")
        .values_list("to_state", flat=True)
    )
    age(handoff)

    handoffs_archive_settled()

    row = ArchivedHandoff.objects.get(action_key=handoff.action_key)
    assert (row.handoff_id, row.workspace_id, row.destination, row.final_state) == (
        handoff.pk,
        7,
        handoff.destination,
        S.DELIVERED,
    )
    assert (row.task_id, row.payload_hash, row.delivered_at) == (
        handoff.destination_id,
        handoff.payload_hash,
        handoff.delivered_at,
    )
    assert row.task_id and row.archived_at is not None
    assert len(row.history["attempts"]) == attempts == 1
    assert [e["to"] for e in row.history["events"]] == events
    assert [s["status"] for s in row.history["status_events"]] == ["done"]
    assert not Attempt.objects.filter(handoff_id=handoff.pk).exists()
    assert not HandoffEvent.objects.filter(handoff_id=handoff.pk).exists()
    assert not StatusEvent.objects.filter(webhook_id="msg_1").exists()


def test_each_batch_is_one_short_transaction_of_at_most_the_batch_size():
    rows = [settled(n) for n in range(1, 26)]
    age(*rows)

    with CaptureQueriesContext(connection) as queries:
        run = handoffs_archive_settled(batch_size=10, max_batches=1, pause_seconds=0)

    assert (run.archived, run.batches) == (10, 1)
    assert ArchivedHandoff.objects.count() == 10 and Handoff.objects.count() == 15
    deletes = [q["sql"] for q in queries if q["sql"].startswith('DELETE FROM "outbox_handoff"')]
    assert len(deletes) == 1
    # The oldest change first.
    assert archived_ids() == {h.pk for h in rows[:10]}

    rest = handoffs_archive_settled(batch_size=10, pause_seconds=0)
    assert (rest.archived, rest.batches) == (15, 2)
    assert Handoff.objects.count() == 0


def test_running_twice_is_the_same_as_once():
    rows = [settled(n) for n in range(1, 6)] + [settled(9, S.PENDING)]
    age(*rows)
    first = handoffs_archive_settled()
    after_first = (archived_ids(), set(Handoff.objects.values_list("pk", flat=True)))

    second = handoffs_archive_settled()

    assert (first.archived, second.archived) == (5, 0)
    assert (archived_ids(), set(Handoff.objects.values_list("pk", flat=True))) == after_first


def test_a_dry_run_counts_and_changes_nothing():
    rows = [settled(n) for n in range(1, 4)]
    age(*rows)

    run = handoffs_archive_settled(dry_run=True)

    assert run.archived == 3
    assert not ArchivedHandoff.objects.exists() and Handoff.objects.count() == 3


def test_a_step_named_by_a_compensation_leaves_after_its_compensation():
    step = settled(
        1, instance_key="onboarding:7:1:1", compensation_state=CompensationState.COMPENSATED
    )
    compensation = settled(
        2,
        instance_key="onboarding:7:1:1",
        kind=HandoffKind.COMPENSATION,
        compensates=step,
        action_key="onboarding:7:1:1:create:compensate",
    )
    age(step, compensation)

    first = handoffs_archive_settled()
    assert archived_ids() == {compensation.pk}
    second = handoffs_archive_settled()

    assert (first.archived, second.archived) == (1, 1)
    assert archived_ids() == {step.pk, compensation.pk}


def test_the_pause_after_a_batch_keeps_batches_to_the_duty_cycle_and_never_below_the_floor():
    assert pause_after(0.3, duty_cycle=0.2, floor=0.0) == pytest.approx(1.2)
    assert pause_after(0.3, duty_cycle=1.0, floor=0.0) == 0.0
    assert pause_after(0.01, duty_cycle=0.5, floor=0.25) == 0.25
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="duty cycle"):
            pause_after(0.3, duty_cycle=bad, floor=0.0)


def test_retention_rests_between_batches_as_the_duty_cycle_says_and_not_after_the_last(
    monkeypatch,
):
    age(*(settled(n) for n in range(1, 4)))
    slept: list[float] = []
    # `retention.time` is the time module itself: the patch reaches every thread of the process, and on a
    # loaded machine a helper thread of another module (polling every 0.2 s) slept during the run. Only this
    # thread's sleeps are retention's.
    this_thread, real_sleep = threading.get_ident(), time.sleep

    def sleep(seconds: float) -> None:
        if threading.get_ident() == this_thread:
            slept.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(retention.time, "sleep", sleep)
    run = handoffs_archive_settled(batch_size=1, max_batches=3, duty_cycle=0.25, pause_seconds=0)
    assert run.archived == 3 and run.batches == 3
    assert len(slept) == 2, "a rest after each batch but the last"
    # 0.25: three times the batch's own time; the three batches' time bounds the two rests.
    assert all(s > 0 for s in slept)
    assert sum(slept) == pytest.approx(run.paused_seconds)
    assert sum(slept) <= 3 * run.working_seconds


def test_a_bad_duty_cycle_fails_before_anything_moves_and_a_spent_time_budget_begins_no_batch():
    age(settled(1))
    with pytest.raises(ValueError):
        handoffs_archive_settled(duty_cycle=0)
    assert Handoff.objects.count() == 1
    run = handoffs_archive_settled(max_seconds=0)
    assert run.batches == 0 and Handoff.objects.count() == 1
    assert handoffs_archive_settled().archived == 1


def test_retention_waits_while_delivery_is_behind_and_goes_on_after_its_longest_wait(settings):
    settings.HANDOFF_RETENTION_YIELD_BACKLOG = 3
    settings.HANDOFF_RETENTION_YIELD_CHECK_SECONDS = 0.01
    settings.HANDOFF_RETENTION_MAX_YIELD_SECONDS = 0.05
    old = [settled(1), settled(2)]
    age(*old)
    due = [settled(10 + n, S.PENDING) for n in range(3)]  # due now: the dispatchers are behind

    assert handoffs_archive_settled(dry_run=True).yields == 0, (
        "a dry run only reads: it never waits"
    )
    behind = handoffs_archive_settled(batch_size=1, pause_seconds=0, duty_cycle=1)

    # Each batch waited its longest, then went anyway: a lasting backlog slows retention, never stops it.
    assert behind.archived == 2 and archived_ids() == {h.pk for h in old}
    assert behind.yields == behind.batches >= 2
    assert behind.yielded_seconds >= behind.yields * 0.05

    Handoff.objects.filter(pk=due[0].pk).update(state=S.CANCELLED)  # 2 due: below the backlog
    age(settled(3))
    caught_up = handoffs_archive_settled(pause_seconds=0)
    assert caught_up.archived == 1
    assert (caught_up.yields, caught_up.yielded_seconds) == (0, 0.0)


@pytest.mark.postgres
def test_on_postgresql_a_batch_reads_ids_keys_and_times_only_and_sends_its_ids_as_one_array():
    age(*(settled(n) for n in range(1, 21)))

    with CaptureQueriesContext(connection) as queries:
        run = handoffs_archive_settled(batch_size=20, max_batches=1, pause_seconds=0)

    assert run.archived == 20 and Handoff.objects.count() == 0
    pick = next(q["sql"] for q in queries if "FOR UPDATE" in q["sql"])
    assert pick.split(" FROM ")[0].count(",") == 2, (
        "id, action key, last change: the rest stays there"
    )
    holds = [
        q["sql"]
        for q in queries
        if q["sql"].startswith(
            ('SELECT "reconciliation_finding"', 'SELECT "reconciliation_incidentmember"')
        )
    ]
    assert len(holds) == 2 and all("unnest(" in sql for sql in holds)
    one_by_one = [q["sql"] for q in queries if re.search(r"IN \((\d+, ){19}\d+\)", q["sql"])]
    assert one_by_one == [], (
        "no statement of the batch (the metrics' carry-over too) lists its ids singly"
    )
