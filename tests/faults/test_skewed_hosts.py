"""Two dispatchers on hosts whose clocks are wrong, one 30 s ahead and one 30 s behind (`faketime`, real
processes), deliver 2,000 handoffs through a real receiver that fails some calls first (a 503, or an answer
lost after the task was created), so that a handoff's attempts, settlement and delivery are spread over both
hosts. Every time of record is the database's: a handoff's events are stored in time order (time order ==
id order), every stored time lies between two readings of the database clock taken around the run, and
`updated_at` (settlement's "oldest first") is the time of the handoff's last event. Nothing is lost, sent
twice or refused. One clock in this test: the database's (`db_time`)."""

from pathlib import Path

import pytest
from django.db import connection

from delivery.models import ReceiverTask
from outbox.clock import db_time
from outbox.models import Attempt, FailureClass, Handoff, HandoffEvent, HandoffState
from tests.faults.test_dispatch_faults import make_handoffs, wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.long,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
COUNT = 2000
SKEW_SECONDS = 30


def skewed(seconds: int) -> dict[str, str]:
    """The environment that runs a process on a host clock `seconds` off: libfaketime (Debian package
    faketime) preloaded. Its monotonic clock moves by the same constant (sleeps and timeouts measure the
    same intervals; leaving it alone breaks Python's `time.sleep` under libfaketime 0.9.10)."""
    libraries = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    if not libraries:
        pytest.fail("libfaketime is not installed: `make faketime` (Debian package faketime)")
    return {
        "LD_PRELOAD": str(libraries[0]),
        "FAKETIME": f"{seconds:+d}s",
    }


def one_row(sql: str, params=()) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def test_hosts_30s_apart_store_every_event_in_time_order_and_lose_nothing(processes):
    keys = make_handoffs(COUNT)
    processes.start_receiver(
        faults={"fraction": 0.3, "kinds": ["http_503", "drop_after_commit"], "seed": 26}
    )
    started = db_time()
    ahead = processes.start_dispatcher("ahead", **skewed(SKEW_SECONDS))
    behind = processes.start_dispatcher("behind", **skewed(-SKEW_SECONDS))
    wait_until(
        lambda: not Handoff.objects.exclude(state=S.DELIVERED).exists(),
        timeout=300,
        what="every handoff delivered",
        procs=[ahead, behind],
    )
    finished = db_time()
    processes.stop_all()

    assert_nothing_lost_nor_refused(keys, (ahead, behind))
    assert_both_hosts_wrote_the_same_handoffs()
    assert_in_time_order()
    assert_on_the_database_clock(started, finished)


def assert_nothing_lost_nor_refused(keys: list[str], procs) -> None:
    # No loss, no second effect.
    assert Handoff.objects.filter(state=S.DELIVERED).count() == COUNT
    assert ReceiverTask.objects.filter(action_key__in=keys).count() == COUNT
    # No refusal: no credential failure (signatures are checked against the receiver's clock), no outcome
    # refused for a lease taken over (leases are on the database clock), nobody asked to look.
    assert not Attempt.objects.filter(failure_class=FailureClass.CREDENTIAL).exists()
    assert not HandoffEvent.objects.filter(to_state=S.NEEDS_ATTENTION).exists()
    for proc in procs:
        assert "taken over" not in Path(proc.log_path).read_text()


def assert_both_hosts_wrote_the_same_handoffs() -> None:
    # Both hosts wrote events of the same handoffs: the case a skewed clock would have put out of order.
    shared = one_row(
        "SELECT count(*) FROM (SELECT handoff_id FROM outbox_handoffevent "
        "GROUP BY handoff_id HAVING count(DISTINCT actor_label) > 1) s"
    )[0]
    settled = HandoffEvent.objects.filter(from_state=S.UNCERTAIN, to_state=S.DELIVERED).count()
    print(f"{shared} handoffs with events from both hosts, {settled} settled by lookup")
    assert shared > 100 and settled > 0


def assert_in_time_order() -> None:
    # Every handoff's events in time order: no event stored earlier than the one before it.
    backwards = one_row(
        "SELECT count(*) FROM (SELECT at < lag(at) OVER (PARTITION BY handoff_id ORDER BY id) AS back "
        "FROM outbox_handoffevent) e WHERE back"
    )[0]
    assert backwards == 0, f"{backwards} event pairs stored out of time order"
    attempts_backwards = one_row(
        "SELECT count(*) FROM (SELECT started_at < lag(started_at) OVER (PARTITION BY handoff_id "
        "ORDER BY number) AS back, finished_at < started_at AS short FROM outbox_attempt) a "
        "WHERE back OR short"
    )[0]
    assert attempts_backwards == 0, f"{attempts_backwards} attempts out of time order"


def assert_on_the_database_clock(started, finished) -> None:
    # Every stored time is the database's: within the run, as the database measured it (a 30 s skew is not).
    outside = one_row(
        "SELECT "
        "(SELECT count(*) FROM outbox_handoffevent WHERE at NOT BETWEEN %s AND %s), "
        "(SELECT count(*) FROM outbox_attempt WHERE started_at NOT BETWEEN %s AND %s "
        "OR finished_at NOT BETWEEN %s AND %s), "
        "(SELECT count(*) FROM outbox_handoff WHERE updated_at NOT BETWEEN %s AND %s "
        "OR delivered_at NOT BETWEEN %s AND %s)",
        [started, finished] * 5,
    )
    assert outside == (0, 0, 0), f"times outside the run (events, attempts, handoffs): {outside}"
    # Settlement's "oldest first" reads updated_at: it is the time of the handoff's last event.
    apart = one_row(
        "SELECT count(*) FROM outbox_handoff h JOIN (SELECT handoff_id, max(at) AS last_at "
        "FROM outbox_handoffevent GROUP BY handoff_id) e ON e.handoff_id = h.id "
        "WHERE abs(extract(epoch FROM h.updated_at - e.last_at)) > 1"
    )[0]
    assert apart == 0, f"{apart} handoffs whose updated_at is not their last event's time"
