"""Due times and leases are written and compared on one clock, the database's.

The Python clock is moved an hour away on purpose: a due time written from Python (the old bug, which
on SQLite also lost the race within the millisecond a handoff was created) would then not be due.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.dispatch.dispatcher import handoff_deliver
from outbox.failures import DeliveryResult
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.retry import RetryPolicy
from outbox.services import handoff_claim_due, handoff_expire_leases, handoff_record
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


@pytest.fixture
def python_clock_skew(monkeypatch):
    real_now = timezone.now

    def skew(delta: timedelta) -> None:
        monkeypatch.setattr(timezone, "now", lambda: real_now() + delta)

    return skew


def record(n: int = 1) -> Handoff:
    payload = {"client_name": f"Client {n}", "plan": "standard"}
    return handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref=f"request {n} revision 1",
        source_id=n,
        action_key=f"onboarding:7:{n}:1",
        payload=payload,
    )


@pytest.mark.parametrize(
    "delta", [timedelta(hours=1), timedelta(0)], ids=["python-clock-ahead", "same-instant"]
)
def test_a_new_handoff_is_due_the_moment_it_is_recorded(python_clock_skew, delta):
    python_clock_skew(delta)
    handoff = record()
    claims = handoff_claim_due(worker="w1")
    assert [c.handoff_id for c in claims] == [handoff.pk]


def test_a_backoff_of_zero_is_due_at_once_whatever_the_python_clock_says(python_clock_skew):
    python_clock_skew(timedelta(hours=1))
    handoff = record()
    failure = DeliveryResult.failed(
        FailureClass.TRANSIENT, "http_503", "try later", status_code=503
    )
    destination = ScriptedDestination(
        failure, policy=RetryPolicy(max_attempts=5, base_delay=0.0, max_delay=0.0)
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.PENDING
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.DELIVERED


def test_a_backoff_is_measured_on_the_database_clock(python_clock_skew):
    python_clock_skew(timedelta(hours=-1))
    handoff = record()
    failure = DeliveryResult.failed(
        FailureClass.TRANSIENT, "rate_limited", "slow down", retry_after=600
    )
    destination = ScriptedDestination(
        failure, policy=RetryPolicy(max_attempts=5, max_retry_after=600)
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.PENDING
    assert handoff_claim_due(worker="w2") == []
    assert Handoff.objects.retrying().filter(pk=handoff.pk).exists()


@pytest.mark.parametrize(
    "delta", [timedelta(hours=1), timedelta(hours=-1)], ids=["ahead", "behind"]
)
def test_a_live_lease_does_not_expire_whatever_the_python_clock_says(python_clock_skew, delta):
    record()
    [claim] = handoff_claim_due(worker="w1", lease_seconds=600)
    python_clock_skew(delta)
    assert handoff_expire_leases() == 0
    assert Handoff.objects.get(pk=claim.handoff_id).state == S.IN_FLIGHT


def test_now_itself_is_the_statements_time_with_no_offset_sent():
    """`db_now()` compiles to the statement's time alone, with no parameter: a claim's text holds it several times
    (psycopg keeps only texts under 4,096 characters converted), and a zero offset is no value to send. The same
    instant is written: a row stamped with it is as old as one stamped an offset of -0.001 s later, not older."""
    from django.db import connections

    from lib.databases import DB
    from outbox.clock import DbNow, db_time

    connection = connections[DB]
    compiler = Handoff.objects.all().query.get_compiler(DB)
    sql, params = DbNow().as_sql(compiler, connection)
    assert params == [] and "%s" not in sql
    _, offset_params = DbNow(-0.001).as_sql(compiler, connection)
    assert offset_params
    before = db_time()
    handoff = record()
    Handoff.objects.filter(pk=handoff.pk).update(next_attempt_at=DbNow())
    stamped = Handoff.objects.values_list("next_attempt_at", flat=True).get(pk=handoff.pk)
    assert before <= stamped <= db_time()
