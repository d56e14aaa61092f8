"""The claim, a batch's outcomes, the limits and the destination's row read before them are prepared once per
connection on PostgreSQL (`lib.databases.prepared_cursor`): their plans were made anew at every batch, most of an
empty claim's time; behind a transaction-mode pooler they are not prepared."""

import threading

import pytest
from django.db import connection

from delivery.models import ReceiverTask
from outbox.destinations.registry import destination_named
from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.runner import _serve_turn
from outbox.dispatch.serving import Turn
from outbox.models import Attempt, DestinationConfig, DestinationHealth, HandoffState
from outbox.services.limits import destination_acquire, destination_release

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default", "delivery"])]


def _plans(statement_like: str) -> tuple[int, int]:
    """Generic and custom plans of this session's prepared statements whose text is LIKE `statement_like`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(generic_plans), 0), COALESCE(SUM(custom_plans), 0) "
            "FROM pg_prepared_statements WHERE statement LIKE %s",
            [statement_like],
        )
        generic, custom = cursor.fetchone()
    return int(generic), int(custom)


def _claim_plans() -> tuple[int, int]:
    """Generic and custom plans of this session's prepared claims."""
    return _plans("WITH due AS%")


def _claim(limit: int = 20):
    return handoff_claim_due(worker="w1", limit=limit, lease_seconds=60, destination_name="system")


def test_repeated_claims_reuse_one_generic_plan_and_claim_as_before(make_handoff, settings):
    before = _claim_plans()
    # PostgreSQL weighs a generic plan against the custom ones after five executions.
    for _ in range(8):
        assert _claim() == []
    handoffs = [make_handoff(n, destination="system") for n in range(1, 4)]
    claims = _claim()
    prepared = _claim_plans()
    # The claim index's condition (state = 'pending') is in the text, so the generic plan can use it.
    assert prepared[0] - before[0] >= 4
    assert sorted(claim.handoff_id for claim in claims) == sorted(h.pk for h in handoffs)
    for handoff, claim in zip(handoffs, sorted(claims, key=lambda c: c.handoff_id), strict=True):
        handoff.refresh_from_db()
        assert (handoff.state, handoff.lease_owner) == (HandoffState.IN_FLIGHT, "w1")
        assert claim.payload == handoff.payload and claim.epoch == handoff.fencing_epoch
        attempt = Attempt.objects.get(pk=claim.attempt_id)
        assert (attempt.handoff_id, attempt.call_started) == (handoff.pk, None)
    # Behind a transaction-mode pooler (DATABASE_TRANSACTION_POOLER) nothing is prepared.
    settings.DATABASE_PREPARED_STATEMENTS = False
    make_handoff(9, destination="system")
    assert len(_claim()) == 1
    for _ in range(3):
        assert _claim() == []
    assert _claim_plans() == prepared


def _outcome_runs() -> int:
    """Executions of this session's prepared outcome statements (each by a generic or a custom plan: which one
    PostgreSQL picks depends on the table's statistics)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(generic_plans + custom_plans), 0) FROM pg_prepared_statements "
            "WHERE statement LIKE 'WITH v AS%%'"
        )
        return int(cursor.fetchone()[0])


def test_a_batch_of_deliveries_is_recorded_by_one_prepared_statement_turn_after_turn(make_handoff):
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")
    before = _outcome_runs()
    for n in range(1, 9):  # each turn's outcomes in the prepared statement of `outbox/delivered.py`
        handoffs = [make_handoff(n * 10 + k, destination="system") for k in range(2)]
        assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).delivered == 2
        for handoff in handoffs:
            handoff.refresh_from_db()
            assert handoff.state == HandoffState.DELIVERED
    assert _outcome_runs() - before == 8
    assert ReceiverTask.objects.count() == 16


def test_the_limits_read_before_each_claim_is_planned_once():
    """The destination's limits, breaker and holds, read before every claim (`outbox/services/limits.py`)."""
    for _ in range(8):
        permit = destination_acquire(name="system", worker="w1", requests=1, lease_seconds=60)
        destination_release(permit=permit)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(generic_plans), 0) FROM pg_prepared_statements "
            "WHERE statement LIKE 'SELECT l.max_concurrency%%'"
        )
        assert cursor.fetchone()[0] >= 3


def test_the_destinations_row_read_at_each_turn_is_planned_once():
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    for _ in range(8):
        assert destination_named("system").name == "system"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(generic_plans), 0) FROM pg_prepared_statements "
            'WHERE statement LIKE \'SELECT "outbox_destinationconfig"."kind"%%\''
        )
        assert cursor.fetchone()[0] >= 3


def _due_probe_plans() -> tuple[int, int]:
    """Generic and custom plans of this session's prepared due probes (`runner.handoffs_due`)."""
    return _plans("SELECT %outbox_handoff%LIMIT 1")


def test_an_idle_dispatchers_due_probe_reuses_one_generic_plan_and_answers_as_before(make_handoff):
    """An idle dispatcher probes every `idle_sleep`; PostgreSQL planned each probe afresh (0.39 of its 0.40 ms
    of database CPU on an empty outbox). Prepared with its states in its text, it keeps a generic plan, and
    still sees exactly what is due: not a future retry, not a held case, not another destination's."""
    from outbox.dispatch.runner import handoffs_due

    before = _due_probe_plans()
    for _ in range(8):
        assert handoffs_due("system") is False
    later = make_handoff(1, destination="system")
    type(later).objects.filter(pk=later.pk).update(next_attempt_at="2999-01-01T00:00:00Z")
    make_handoff(2, destination="elsewhere")
    assert handoffs_due("system") is False
    due = make_handoff(3, destination="system")
    assert handoffs_due("system") is True
    type(due).objects.filter(pk=due.pk).update(state=HandoffState.DELIVERED)
    assert handoffs_due("system") is False
    assert _due_probe_plans()[0] - before[0] >= 4
