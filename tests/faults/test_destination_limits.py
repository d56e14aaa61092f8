"""A backlog drained by several real dispatcher processes under the limits an operator set, measured where it
matters: at the receiver, over HTTP. It never sees more calls in flight or more requests within one second
than the limits, every handoff is delivered exactly once, and a 429 with Retry-After holds the whole
destination (no call arrives until the hold ends, beyond one already on its way)."""

import json
from collections import Counter
from pathlib import Path

import pytest
from django.db.models import Count

from delivery.models import ReceiverTask
from outbox.models import DestinationHold, Handoff, HandoffState, HoldKind
from outbox.services.limits import destination_set_limits
from tests.factories import make_user
from tests.faults.test_destination_outage import approve
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
HANDOFFS = 400
MAX_CONCURRENCY = 2
MAX_PER_SECOND = 4
RETRY_AFTER = 3
# The receiver answers this one handoff's item with a 429 and Retry-After once (in the second batch or so,
# so that most of the backlog is still waiting when the hold begins).
HELD_BY = f"onboarding:7:{25}:1"


def calls_seen(path: Path) -> list[tuple[float, float]]:
    """(arrived, answered) of every create call the receiver saw, in arrival order."""
    lines = [line.split() for line in path.read_text().splitlines()]
    return sorted(
        (float(arrived), float(answered)) for method, arrived, answered in lines if method == "POST"
    )


def most_in_flight(calls: list[tuple[float, float]]) -> int:
    # An answer sent at the very instant another call arrives is counted as over first: the safe side here,
    # since the receiver's answered time is earlier than the sender's release of its slot.
    edges = sorted(
        [(arrived, 1) for arrived, _ in calls] + [(answered, -1) for _, answered in calls]
    )
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def most_in_one_second(calls: list[tuple[float, float]]) -> int:
    arrivals = [arrived for arrived, _ in calls]
    return max(
        sum(1 for other in arrivals[i:] if other < start + 1.0) for i, start in enumerate(arrivals)
    )


def test_a_backlog_drains_under_the_operators_limits_and_a_retry_after_holds_the_destination(
    processes, tmp_path
):
    observed = tmp_path / "receiver-calls.log"
    processes.start_receiver(
        faults={"observe": str(observed), "keys": {HELD_BY: "http_429"}, "retry_after": RETRY_AFTER}
    )
    destination_set_limits(
        name="receiver",
        max_concurrency=MAX_CONCURRENCY,
        max_requests_per_second=MAX_PER_SECOND,
        actor=make_user("olga"),
        reason="the receiver's team asked for 2 and 4/s",
    )
    for n in range(1, HANDOFFS + 1):
        approve(n)
    overrides = {
        "RECEIVER_SUPPORTS_BATCH": "1",
        "HANDOFF_CLAIM_BATCH": "10",
        "HANDOFF_MAX_ATTEMPTS": "",
    }
    dispatchers = [processes.start_dispatcher(f"d{n}", **overrides) for n in (1, 2, 3)]
    wait_until(
        lambda: not Handoff.objects.exclude(state__in=(S.DELIVERED, S.NEEDS_ATTENTION)).exists(),
        timeout=300,
        what="the backlog to drain",
        procs=dispatchers,
    )

    states = Counter(Handoff.objects.values_list("state", flat=True))
    assert states == {S.DELIVERED: HANDOFFS}, states
    assert ReceiverTask.objects.count() == HANDOFFS
    assert (
        not ReceiverTask.objects.values("action_key")
        .annotate(c=Count("id"))
        .filter(c__gt=1)
        .exists()
    )
    assert all(proc.poll() is None for proc in dispatchers), "no dispatcher exited"

    calls = calls_seen(observed)
    # Batches of up to 10: at least 40 calls, and the receiver saw each of them.
    assert len(calls) >= HANDOFFS // 10
    report = {
        "calls": len(calls),
        "in_flight": most_in_flight(calls),
        "per_second": most_in_one_second(calls),
    }
    assert report["in_flight"] <= MAX_CONCURRENCY, json.dumps(report)
    assert report["per_second"] <= MAX_PER_SECOND, json.dumps(report)

    # The Retry-After hold's row, over by now: from when it was written to its end (database clock, this
    # machine's).
    [hold] = DestinationHold.objects.filter(destination="receiver", kind=HoldKind.RETRY_AFTER)
    assert "HTTP 429 with Retry-After 3 s" in hold.reason
    held_from, held_until = hold.starts_at.timestamp(), hold.ends_at.timestamp()
    during = [arrived for arrived, _ in calls if held_from < arrived < held_until]
    # A call admitted before the hold was written may still arrive: at most the other slot's. Nothing else.
    assert len(during) <= MAX_CONCURRENCY - 1, (during, held_from, held_until)
    assert any(arrived > held_until for arrived, _ in calls), "the drain went on after the hold"
