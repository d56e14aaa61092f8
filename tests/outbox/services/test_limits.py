"""Per-destination limits: calls in flight, requests per second, and the Retry-After hold, shared by every
dispatcher through the database. Time is moved by writing the slots' and the hold's times on the database
clock, never by sleeping."""

import threading
from collections import Counter

import pytest

from outbox.clock import db_now, db_now_plus
from outbox.dispatch.dispatcher import dispatch_batch, drain
from outbox.failures import DeliveryResult
from outbox.limit_rules import DestinationLimited
from outbox.models import (
    DestinationHealth,
    DestinationSlot,
    FailureClass,
    Handoff,
    HandoffState,
    SlotKind,
)
from outbox.services.limits import (
    destination_acquire,
    destination_release,
    destination_set_limits,
)
from tests.factories import make_user, pause_by_breaker, retry_after_hold, retry_after_rows
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


@pytest.fixture
def set_limits():
    actor = make_user("olga")

    def set_(*, concurrency=None, rate=None, name="receiver"):
        destination_set_limits(
            name=name,
            max_concurrency=concurrency,
            max_requests_per_second=rate,
            actor=actor,
            reason="receiver team asked",
        )

    return set_


def slots(kind: str):
    return DestinationSlot.objects.filter(destination="receiver", kind=kind)


def a_second_passes(kind: str = SlotKind.RATE, count: int | None = None) -> None:
    """Move the database clock past the slots' second: they are free from a moment ago."""
    busy = slots(kind).exclude(free_at__isnull=True).order_by("number").values_list("pk", flat=True)
    ids = list(busy[:count] if count is not None else busy)
    DestinationSlot.objects.filter(pk__in=ids).update(free_at=db_now_plus(-0.001))


def no_second_passes() -> None:
    """Hold the database clock still, as seen by the limiter: the used rate slots stay busy for a minute."""
    slots(SlotKind.RATE).exclude(free_at__isnull=True).update(free_at=db_now_plus(60))


def attempts_made() -> int:
    return sum(Handoff.objects.values_list("attempts", flat=True))


def test_a_rate_limit_admits_the_limit_then_one_request_per_slot_freed(make_handoff, set_limits):
    for n in range(1, 11):
        make_handoff(n)
    set_limits(rate=3)
    destination = ScriptedDestination()
    first = dispatch_batch(destination=destination)
    assert (first.claimed, first.delivered, destination.calls) == (3, 3, 3)
    # Each used slot is free one second after its answer, on the database clock: never sooner.
    assert slots(SlotKind.RATE).filter(free_at__gt=db_now_plus(1.0)).count() == 0
    assert slots(SlotKind.RATE).exclude(free_at__isnull=True).count() == 3

    no_second_passes()
    refused = dispatch_batch(destination=destination)
    assert refused.limited and refused.claimed == 0 and destination.calls == 3
    assert 0 < refused.wait_seconds <= 1.0
    assert attempts_made() == 3

    a_second_passes(count=1)
    one = dispatch_batch(destination=destination)
    assert (one.claimed, one.delivered, destination.calls) == (1, 1, 4)
    # The slot just used is free a second after its answer: a second lost to a loaded machine before the next
    # batch would free it (and the batch would be let in), so the clock is held still again.
    no_second_passes()
    assert dispatch_batch(destination=destination).limited
    a_second_passes()
    assert dispatch_batch(destination=destination).claimed == 3
    assert Handoff.objects.filter(state=S.NEEDS_ATTENTION).count() == 0


def test_a_batch_call_is_one_request_whatever_it_carries(make_handoff, set_limits):
    for n in range(1, 31):
        make_handoff(n)
    set_limits(rate=1)
    destination = ScriptedDestination(supports_batch=True)
    first = dispatch_batch(destination=destination, limit=20)
    assert (first.claimed, first.delivered) == (20, 20)
    assert slots(SlotKind.RATE).exclude(free_at__isnull=True).count() == 1
    no_second_passes()
    assert dispatch_batch(destination=destination, limit=20).limited
    a_second_passes()
    assert dispatch_batch(destination=destination, limit=20).claimed == 10


class NestedDispatch(ScriptedDestination):
    """While its call is out, another worker tries to dispatch: what a second dispatcher process does."""

    def __init__(self, **flags):
        super().__init__(**flags)
        self.inner = []

    def deliver(self, outgoing):
        if not self.inner:
            self.inner.append(
                dispatch_batch(destination=ScriptedDestination(), worker="w2", limit=1)
            )
        return super().deliver(outgoing)


def test_no_more_calls_in_flight_than_the_concurrency_limit(make_handoff, set_limits):
    make_handoff(1), make_handoff(2)
    set_limits(concurrency=1)
    destination = NestedDispatch()
    outer = dispatch_batch(destination=destination, worker="w1", limit=1)
    [inner] = destination.inner
    assert outer.delivered == 1
    assert inner.limited and inner.claimed == 0
    # Given back right after the call: the next dispatcher is let in at once.
    assert slots(SlotKind.CONCURRENCY).filter(holder="").count() == 1
    assert dispatch_batch(destination=ScriptedDestination(), worker="w2").delivered == 1


def test_a_second_slot_lets_a_second_call_in_flight(make_handoff, set_limits):
    make_handoff(1), make_handoff(2)
    set_limits(concurrency=2)
    destination = NestedDispatch()
    dispatch_batch(destination=destination, worker="w1", limit=1)
    [inner] = destination.inner
    assert not inner.limited and inner.delivered == 1


def test_a_dead_holders_slot_comes_back_when_its_lease_runs_out(make_handoff, set_limits, settings):
    # Five minutes: the check that the slot is held for the lease leaves a minute for a loaded machine.
    settings.HANDOFF_LEASE_SECONDS = 300
    make_handoff(1)
    set_limits(concurrency=1, rate=5)
    # A dispatcher takes its permit and is SIGKILLed before it gives it back.
    destination_acquire(
        name="receiver", worker="dead", requests=1, lease_seconds=settings.HANDOFF_LEASE_SECONDS
    )
    held = slots(SlotKind.CONCURRENCY).get(holder__startswith="dead:")
    assert DestinationSlot.objects.filter(
        pk=held.pk,
        free_at__gt=db_now_plus(settings.HANDOFF_LEASE_SECONDS - 60),
        free_at__lte=db_now_plus(settings.HANDOFF_LEASE_SECONDS),
    ).exists()
    refused = dispatch_batch(destination=ScriptedDestination())
    assert refused.limited and refused.claimed == 0
    # Its lease runs out on the database clock.
    DestinationSlot.objects.filter(pk=held.pk).update(free_at=db_now_plus(-0.001))
    assert dispatch_batch(destination=ScriptedDestination()).delivered == 1


def test_a_slot_renewed_with_the_leases_stays_with_its_holder(set_limits):
    set_limits(concurrency=1)
    from outbox.services.limits import destination_renew

    permit = destination_acquire(name="receiver", worker="w1", requests=1, lease_seconds=30)
    assert destination_renew(permit=permit, lease_seconds=30)
    # Lost (its lease ran out and another worker took it): the holder must not call.
    DestinationSlot.objects.filter(pk__in=permit.slot_ids).update(holder="w2:other")
    assert not destination_renew(permit=permit, lease_seconds=30)
    destination_release(permit=permit)
    assert slots(SlotKind.CONCURRENCY).get().holder == "w2:other"


def rate_limited(retry_after: float, status: int = 429) -> DeliveryResult:
    return DeliveryResult.failed(
        FailureClass.TRANSIENT,
        "rate_limited" if status == 429 else f"http_{status}",
        "slow down",
        status_code=status,
        retry_after=retry_after,
    )


def test_a_retry_after_holds_the_whole_destination_and_no_handoff_spends_an_attempt(make_handoff):
    for n in range(1, 6):
        make_handoff(n)
    # Five minutes: the check that the hold is still on leaves a minute for a loaded machine's stalls.
    destination = ScriptedDestination(rate_limited(300))
    first = dispatch_batch(destination=destination, limit=1)
    assert first.retrying == 1
    health = DestinationHealth.objects.with_retry_after().filter(name="receiver")
    assert health.filter(hold_until__gt=db_now_plus(240), hold_until__lte=db_now_plus(300)).exists()
    assert "429" in health.get().hold_reason
    before = attempts_made()
    refused = drain(destination=destination)
    assert refused.limited and refused.claimed == 0 and destination.calls == 1
    assert attempts_made() == before
    # The hold ends on the database clock; everything goes, nothing went to a person.
    retry_after_rows("receiver").update(ends_at=db_now_plus(-0.001))
    Handoff.objects.filter(state=S.PENDING).update(next_attempt_at=db_now())
    drain(destination=destination)
    assert Handoff.objects.filter(state=S.DELIVERED).count() == 5
    assert Handoff.objects.filter(state=S.NEEDS_ATTENTION).count() == 0


def test_a_hold_is_capped_and_never_shortened(make_handoff, settings):
    settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS = 600
    make_handoff(1), make_handoff(2)
    dispatch_batch(destination=ScriptedDestination(rate_limited(86_400, status=503)), limit=1)
    health = DestinationHealth.objects.with_retry_after().filter(name="receiver")
    assert health.filter(hold_until__gt=db_now_plus(540), hold_until__lte=db_now_plus(600)).exists()
    retry_after_rows("receiver").update(ends_at=db_now_plus(-0.001))
    Handoff.objects.filter(state=S.PENDING).update(next_attempt_at=db_now())
    dispatch_batch(destination=ScriptedDestination(rate_limited(10)), limit=1)
    retry_after_rows("receiver").update(ends_at=db_now_plus(400))
    Handoff.objects.filter(state=S.PENDING).update(next_attempt_at=db_now())
    # A shorter Retry-After seen meanwhile by another worker leaves the longer hold as it is.
    from outbox.services.limits import _hold

    _hold("receiver", 5, "HTTP 429 with Retry-After 5 s")
    assert health.filter(hold_until__gt=db_now_plus(340)).exists()


def test_an_answer_without_retry_after_holds_nothing(make_handoff):
    make_handoff(1)
    dispatch_batch(destination=ScriptedDestination(rate_limited(None)), limit=1)
    assert not retry_after_rows("receiver").exists()


def test_without_limits_nothing_is_written_for_them(make_handoff):
    make_handoff(1)
    assert dispatch_batch(destination=ScriptedDestination()).delivered == 1
    assert not DestinationSlot.objects.exists()


def test_a_destination_first_seen_gets_the_configured_default_limits(make_handoff, settings):
    settings.HANDOFF_DESTINATION_MAX_CONCURRENCY = 1
    make_handoff(1)
    destination_acquire(name="receiver", worker="w1", requests=1, lease_seconds=30)
    with pytest.raises(DestinationLimited):
        destination_acquire(name="receiver", worker="w2", requests=1, lease_seconds=30)
    assert dispatch_batch(destination=ScriptedDestination()).limited


class RecordingStop(threading.Event):
    """The runner's stop event: records how long the delivery loop waits, and stops it after the first wait."""

    def __init__(self):
        super().__init__()
        self.waits = []

    def wait(self, timeout=None):
        if threading.current_thread() is threading.main_thread():
            self.waits.append(timeout)
            self.set()
            return True
        return super().wait(timeout)


def test_a_refused_dispatcher_waits_for_the_next_slot_instead_of_spinning(monkeypatch):
    from outbox.dispatch import runner
    from outbox.dispatch.dispatcher import RunStats

    batches = []

    def refused(**_kwargs):
        batches.append(1)
        return RunStats(limited=True, wait_seconds=0.25)

    monkeypatch.setattr(runner, "dispatch_batch", refused)
    monkeypatch.setattr(runner, "maintain", lambda **_kwargs: RunStats())
    stop = RecordingStop()
    runner.run_forever(destination=ScriptedDestination(), worker="w1", idle_sleep=5.0, stop=stop)
    assert batches == [1] and stop.waits == [0.25]


def test_a_renewal_keeps_the_used_rate_slots_too(set_limits):
    from outbox.services.limits import destination_renew

    set_limits(rate=2)
    permit = destination_acquire(name="receiver", worker="w1", requests=2, lease_seconds=5)
    permit.made([DeliveryResult.ok(task_id="t1", created=True)])
    assert destination_renew(permit=permit, lease_seconds=300)
    # Both stay taken for the new lease: the used one must not come free before a second after its answer.
    assert slots(SlotKind.RATE).filter(free_at__gt=db_now_plus(240)).count() == 2
    answered = DestinationSlot.objects.annotate(now=db_now()).values_list("now", flat=True).first()
    destination_release(permit=permit)
    assert slots(SlotKind.RATE).filter(free_at__isnull=True).count() == 1
    # The used one: free a second after the answer, on the database clock, never sooner.
    [used] = slots(SlotKind.RATE).exclude(free_at__isnull=True)
    assert (used.free_at - answered).total_seconds() >= 1.0
    assert slots(SlotKind.RATE).filter(pk=used.pk, free_at__lte=db_now_plus(1.0)).exists()


def test_a_hold_written_while_a_slot_is_being_taken_sends_nothing(set_limits, monkeypatch):
    # Another worker's 429 writes the hold after this worker read the limits and before it took its slots
    # (the race a real drain met: a call arrived during the hold through the slot freed by the 429's worker).
    from outbox.services import limits

    set_limits(concurrency=2, rate=10)
    take = limits._take_or_create

    def held_meanwhile(*args, **kwargs):
        retry_after_hold("receiver", 30, "HTTP 429 with Retry-After 30 s")
        return take(*args, **kwargs)

    monkeypatch.setattr(limits, "_take_or_create", held_meanwhile)
    with pytest.raises(DestinationLimited, match="held"):
        destination_acquire(name="receiver", worker="w1", requests=1, lease_seconds=30)
    assert not slots(SlotKind.CONCURRENCY).exclude(holder="").exists()
    assert not slots(SlotKind.RATE).exclude(holder="").exists()


def test_one_call_per_handoff_stops_at_the_first_retry_after_and_gives_the_rest_back(make_handoff):
    for n in range(1, 6):
        make_handoff(n)
    destination = ScriptedDestination(rate_limited(300), supports_batch=False)
    stats = dispatch_batch(destination=destination, limit=5)
    # One call, not five: the 429 holds the whole destination, so the other four claims go back unsent.
    assert destination.calls == 1
    assert stats.claimed == 5 and stats.retrying == 1 and stats.released == 4
    # Only the call made counts against a handoff's run; the four given back are marked not sent.
    assert sorted(Handoff.objects.values_list("attempts_in_run", flat=True)) == [0, 0, 0, 0, 1]
    assert retry_after_rows("receiver").filter(ends_at__gt=db_now_plus(240)).exists()
    assert Handoff.objects.filter(state=S.PENDING).count() == 5


class FirstCallThen(ScriptedDestination):
    """One call per handoff; right after the first call, `then()` runs: what another worker does meanwhile."""

    def __init__(self, then, **flags):
        super().__init__(supports_batch=False, **flags)
        self.then = then

    def deliver(self, outgoing):
        result = super().deliver(outgoing)
        if self.calls == 1:
            self.then()
        return result


def in_run_attempts() -> list[int]:
    return sorted(Handoff.objects.values_list("attempts_in_run", flat=True))


def test_a_slot_lost_mid_batch_gives_the_rest_back_unsent_not_stranded_in_flight(
    make_handoff, set_limits, settings
):
    for n in range(1, 4):
        make_handoff(n)
    set_limits(concurrency=1)
    settings.HANDOFF_LEASE_SECONDS = 1  # every call renews first
    destination = FirstCallThen(lambda: slots(SlotKind.CONCURRENCY).update(holder="another-worker"))
    stats = dispatch_batch(destination=destination, worker="w1", limit=3)
    assert destination.calls == 1 and stats.delivered == 1 and stats.released == 2
    # The two not sent are pending again, due, with no attempt counted: none waits out a lease to become uncertain.
    assert Counter(Handoff.objects.values_list("state", flat=True)) == {
        S.DELIVERED: 1,
        S.PENDING: 2,
    }
    assert in_run_attempts() == [0, 0, 1]


def test_a_hold_written_by_another_worker_mid_batch_stops_this_one_too(make_handoff, monkeypatch):
    from outbox.dispatch.lease_keeper import LeaseKeeper

    for n in range(1, 4):
        make_handoff(n)
    monkeypatch.setattr(LeaseKeeper, "HOLD_CHECK_SECONDS", 0.0)

    def another_worker_was_told_to_wait():
        retry_after_hold("receiver", 30, "HTTP 429 with Retry-After 30 s")

    destination = FirstCallThen(another_worker_was_told_to_wait)
    stats = dispatch_batch(destination=destination, worker="w1", limit=3)
    assert destination.calls == 1 and stats.released == 2
    assert Counter(Handoff.objects.values_list("state", flat=True)) == {
        S.DELIVERED: 1,
        S.PENDING: 2,
    }


def test_a_paused_destinations_probe_is_not_spent_while_a_hold_refuses_every_call(make_handoff):
    make_handoff(1)
    pause_by_breaker("receiver", next_probe_in=-1)
    retry_after_hold("receiver", 30)
    destination = ScriptedDestination()
    stats = dispatch_batch(destination=destination)
    assert stats.limited and stats.claimed == 0 and destination.calls == 0
    assert DestinationHealth.objects.get(name="receiver").probes == 0


def test_settlement_does_not_ask_a_destination_on_hold(make_handoff):
    from outbox.dispatch.dispatcher import maintain

    make_handoff(1, state=S.UNCERTAIN)
    retry_after_hold("receiver", 30)
    destination = ScriptedDestination()
    assert maintain(destination=destination).settled == {}
    assert Handoff.objects.get().state == S.UNCERTAIN


def test_a_lowered_limit_counts_the_calls_still_in_flight_on_the_slots_past_it(set_limits):
    set_limits(concurrency=4)
    # Three calls in flight on slots 1-3; slot 0 free. The operator lowers the limit to 2.
    slots(SlotKind.CONCURRENCY).filter(number__in=(1, 2, 3)).update(
        holder="others", free_at=db_now_plus(30)
    )
    set_limits(concurrency=2)
    with pytest.raises(DestinationLimited):
        destination_acquire(name="receiver", worker="w1", requests=1, lease_seconds=30)
    # Two of them end: one call in flight (slot 1, within the limit), so one more may start.
    slots(SlotKind.CONCURRENCY).filter(number__in=(2, 3)).update(holder="", free_at=None)
    permit = destination_acquire(name="receiver", worker="w1", requests=1, lease_seconds=30)
    assert len(permit.slot_ids) == 1


def test_a_database_error_after_a_slot_was_taken_gives_the_slot_back_at_once(
    set_limits, monkeypatch
):
    from django.db import OperationalError

    from outbox.services import limits

    set_limits(concurrency=1, rate=5)
    take = limits._take_or_create

    def rate_slots_fail(name, kind, *args):
        if kind == SlotKind.RATE:
            raise OperationalError("connection lost")
        return take(name, kind, *args)

    monkeypatch.setattr(limits, "_take_or_create", rate_slots_fail)
    with pytest.raises(OperationalError):
        destination_acquire(name="receiver", worker="w1", requests=1, lease_seconds=30)
    # Not held for a lease (30 s): the next dispatcher may call at once.
    assert not slots(SlotKind.CONCURRENCY).exclude(holder="").exists()
