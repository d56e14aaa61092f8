"""Every time of record is the database's, whatever the host's clock says.

The test process's Python clock (`django.utils.timezone.now`) is moved an hour ahead, then an hour behind,
between the steps of one handoff, as two hosts with wrong clocks would write them. The stored times
(events, attempts, `updated_at`, `delivered_at`, `attention_since`, the SLA due time) must still be within
seconds of the database's own time, and a handoff's events in time order. Also on SQLite, where the
database clock writes `YYYY-MM-DD HH:MM:SS.SSS` and Django writes microseconds: both kinds of value sort
and compare together.
"""

from datetime import UTC, timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from outbox.clock import db_now, db_time
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver, settle_uncertain
from outbox.failures import DeliveryResult
from outbox.models import Attempt, FailureClass, Handoff, HandoffEvent, HandoffState
from outbox.retry import RetryPolicy
from outbox.services import handoff_record
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
HOUR = timedelta(hours=1)
# How far a stored time may be from the database's "now" read around it: the test's own run time.
NEAR = timedelta(seconds=30)


@pytest.fixture
def host_clock(monkeypatch):
    """Move this process's Python clock (what `timezone.now()` and `auto_now` read) by a delta."""
    real_now = timezone.now

    def skew(delta: timedelta) -> None:
        monkeypatch.setattr(timezone, "now", lambda: real_now() + delta)

    return skew


def record(n: int) -> Handoff:
    return handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref=f"request {n} revision 1",
        source_id=n,
        action_key=f"onboarding:7:{n}:1",
        payload={"client_name": f"Client {n}", "plan": "standard"},
    )


def failing(failure_class: str, reason: str) -> ScriptedDestination:
    return ScriptedDestination(
        DeliveryResult.failed(failure_class, reason, "scripted"),
        policy=RetryPolicy(max_attempts=5, base_delay=0.0, max_delay=0.0),
    )


def assert_near_db(value, db_then) -> None:
    assert value is not None
    assert abs(value - db_then) < NEAR, f"{value} is not the database's time ({db_then})"


def test_times_of_record_come_from_the_database_and_events_stay_in_order(host_clock):
    host_clock(HOUR)
    handoff = record(1)
    # A host an hour ahead: a transient failure (pending again, due at once).
    assert handoff_deliver(handoff_id=handoff.pk, destination=failing("transient", "http_503")) == (
        S.PENDING
    )
    # Then a host an hour behind: a permanent rejection, the handoff needs a person.
    host_clock(-HOUR)
    assert handoff_deliver(
        handoff_id=handoff.pk, destination=failing("permanent", "invalid_payload")
    ) == (S.NEEDS_ATTENTION)
    now = db_time()
    handoff.refresh_from_db()
    for value in (handoff.created_at, handoff.updated_at, handoff.attention_since):
        assert_near_db(value, now)
    expected_due = now + timedelta(minutes=settings.HANDOFF_SLA_MINUTES)
    assert abs(handoff.sla_due_at - expected_due) < NEAR
    assert_attempts_on_the_database_clock(handoff, now)
    events = list(HandoffEvent.objects.filter(handoff=handoff).order_by("pk"))
    assert [e.to_state for e in events] == [
        S.PENDING,
        S.IN_FLIGHT,
        S.PENDING,
        S.IN_FLIGHT,
        S.NEEDS_ATTENTION,
    ]
    times = [e.at for e in events]
    for at in times:
        assert_near_db(at, now)
    assert times == sorted(times), "events stored out of time order"


def assert_attempts_on_the_database_clock(handoff: Handoff, now) -> None:
    for started, finished in Attempt.objects.filter(handoff=handoff).values_list(
        "started_at", "finished_at"
    ):
        assert_near_db(started, now)
        assert_near_db(finished, now)
        assert started <= finished


def test_a_delivery_is_stamped_by_the_database_clock(host_clock):
    host_clock(-HOUR)
    handoff = record(2)
    assert handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination()) == S.DELIVERED
    now = db_time()
    handoff.refresh_from_db()
    assert_near_db(handoff.delivered_at, now)
    assert_near_db(handoff.updated_at, now)
    [event] = HandoffEvent.objects.filter(handoff=handoff, to_state=S.DELIVERED)
    assert_near_db(event.at, now)


class AskedInOrder(InProcessDestination):
    """The real in-process receiver, noting the keys settlement asks about, in order."""

    def __init__(self):
        super().__init__()
        self.asked: list[str] = []

    def lookup(self, action_key):
        self.asked.append(action_key)
        return super().lookup(action_key)


def test_settlement_asks_the_longest_unsettled_first_whatever_the_hosts_clocks(host_clock):
    uncertain = DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "scripted")
    first, second = record(3), record(4)
    # The first became uncertain on a host an hour ahead, the second later on a host an hour behind.
    host_clock(HOUR)
    assert handoff_deliver(handoff_id=first.pk, destination=ScriptedDestination(uncertain)) == (
        S.UNCERTAIN
    )
    host_clock(-HOUR)
    assert handoff_deliver(handoff_id=second.pk, destination=ScriptedDestination(uncertain)) == (
        S.UNCERTAIN
    )
    receiver = AskedInOrder()
    settle_uncertain(destination=receiver)
    assert receiver.asked == [first.action_key, second.action_key]


@pytest.mark.parametrize(
    "offset", [-0.002, 0.002], ids=["python-written-before", "python-written-after"]
)
def test_a_python_written_time_and_a_database_written_time_compare_in_time_order(offset):
    """Rows written before the clock of record (Django's own format) still sort and compare with the
    database's: on SQLite the two are strings of different precision."""
    python_written, db_written = record(5), record(6)
    db_written_at = Handoff.objects.values_list("updated_at", flat=True).get(pk=db_written.pk)
    Handoff.objects.filter(pk=python_written.pk).update(
        updated_at=db_written_at + timedelta(seconds=offset)
    )
    order = list(
        Handoff.objects.filter(pk__in=[python_written.pk, db_written.pk])
        .order_by("updated_at")
        .values_list("pk", flat=True)
    )
    expected = (
        [python_written.pk, db_written.pk] if offset < 0 else [db_written.pk, python_written.pk]
    )
    assert order == expected
    # The database's clock has to pass the written time first: on a fast machine 2 ms may not have gone by.
    written_at = db_written_at + timedelta(seconds=offset)
    while db_time() <= written_at:
        pass
    earlier_than_db = Handoff.objects.filter(pk=python_written.pk, updated_at__lt=db_now()).exists()
    assert earlier_than_db, "a time written a moment ago is earlier than the database's now"


def test_the_database_clock_writes_what_django_reads_back():
    """On SQLite in Django's format (`YYYY-MM-DD HH:MM:SS.ffffff`); the inserted row's time is read back by the
    INSERT."""
    handoff = record(7)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CAST(updated_at AS TEXT) FROM outbox_handoff WHERE id = %s", [handoff.pk]
        )
        [raw] = cursor.fetchone()
    if connection.vendor == "sqlite":
        # Django's own format, so that a time read back and sent as a parameter equals the stored one.
        assert raw == str(timezone.make_naive(handoff.updated_at, UTC))
    assert handoff.updated_at == Handoff.objects.get(pk=handoff.pk).updated_at
