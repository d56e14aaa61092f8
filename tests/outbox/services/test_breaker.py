"""The destination's circuit breaker and the retry window: an outage or a refused credential is the
destination's problem; only reasons of its own hand a handoff to a person."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import ReceiverTask
from incidents.causes import destination_causes
from outbox.breaker_rules import TOKEN_ENDPOINT_DOWN
from outbox.dispatch.dispatcher import dispatch_batch, drain
from outbox.failures import DeliveryResult
from outbox.models import (
    DestinationEvent,
    DestinationHealth,
    DestinationHold,
    DestinationState,
    FailureClass,
    Handoff,
    HandoffState,
    HoldKind,
    PauseReason,
)
from outbox.retry import RetryPolicy
from outbox.services.breaker import destination_hold
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
D = DestinationState


@pytest.fixture(autouse=True)
def breaker_settings(settings):
    settings.HANDOFF_BREAKER_THRESHOLD = 3
    settings.HANDOFF_BREAKER_PROBE_BASE = 60.0
    settings.HANDOFF_BREAKER_PROBE_CAP = 3600.0


def unreachable():
    return DeliveryResult.failed(FailureClass.TRANSIENT, "connect_failed", "connection refused")


def refused():
    return DeliveryResult.failed(
        FailureClass.CREDENTIAL, "credential_rejected", "HTTP 401", status_code=401
    )


def open_probe_now():
    DestinationHealth.objects.filter(name="receiver").update(
        next_probe_at=timezone.now() - timedelta(seconds=1)
    )


def health() -> DestinationHealth:
    return DestinationHealth.objects.get(name="receiver")


def test_consecutive_unreachable_failures_pause_the_destination_and_no_attempt_is_spent(
    make_handoff,
):
    handoffs = [make_handoff(n) for n in range(1, 6)]
    destination = ScriptedDestination(unreachable(), unreachable(), unreachable())
    stats = dispatch_batch(destination=destination, limit=3)
    assert stats.claimed == 3 and destination.calls == 3
    assert (health().state, health().pause_reason) == (D.PAUSED, PauseReason.UNREACHABLE)
    paused = dispatch_batch(destination=destination)
    assert paused.paused and paused.claimed == 0 and destination.calls == 3
    untouched = Handoff.objects.filter(pk__in=[h.pk for h in handoffs[3:]])
    assert list(untouched.values_list("attempts", flat=True)) == [0, 0]
    assert DestinationEvent.objects.filter(to_state=D.PAUSED).count() == 1


def test_a_refused_credential_pauses_at_once_and_the_handoff_waits_instead_of_needing_a_person(
    make_handoff,
):
    first, second = make_handoff(1), make_handoff(2)
    destination = ScriptedDestination(refused())
    dispatch_batch(destination=destination, limit=1)
    assert (health().state, health().pause_reason) == (D.PAUSED, PauseReason.CREDENTIAL)
    first.refresh_from_db()
    assert (first.state, first.failure_class, first.attempts_in_run) == (
        S.PENDING,
        FailureClass.CREDENTIAL,
        0,
    )
    assert first.attention_since is None
    drain(destination=destination)
    assert destination.calls == 1
    second.refresh_from_db()
    assert second.attempts == 0


@pytest.mark.parametrize("result", [refused, unreachable], ids=["credential", "outage"])
def test_a_pause_and_its_hold_start_at_one_reading_of_the_clock(make_handoff, result):
    """The incident quotes the hold's start, the destination's page its `paused_at`: one moment, not two
    readings a statement apart that a second's boundary can fall between ("since 11:53:15" beside
    11:53:16)."""
    for n in range(1, 4):
        make_handoff(n)
    drain(destination=ScriptedDestination(*(result() for _ in range(3))))
    hold = DestinationHold.objects.get(destination="receiver", ended_at__isnull=True)
    assert health().state == D.PAUSED
    assert health().paused_at == hold.starts_at


def test_an_unservable_hold_and_its_pause_start_at_one_reading_of_the_clock():
    assert destination_hold(name="receiver", reason="no configuration for it")
    hold = DestinationHold.objects.get(destination="receiver", ended_at__isnull=True)
    assert (health().pause_reason, health().paused_at) == (PauseReason.UNSERVABLE, hold.starts_at)


def test_a_breaker_hold_carries_its_pause_reason_and_one_without_reads_as_its_kind(make_handoff):
    """The breaker's hold says why it pauses (`pause_reason`). One written before holds carried it (or by the
    release before, which writes the column's default) keeps its meaning: its kind says `unreachable`, and its
    incident stays the same cause, even when its words name the token endpoint (words are not read)."""
    for n in range(1, 4):
        make_handoff(n)
    drain(destination=ScriptedDestination(*(unreachable() for _ in range(3))))
    hold = DestinationHold.objects.get(destination="receiver", ended_at__isnull=True)
    assert (hold.kind, hold.pause_reason) == (HoldKind.BREAKER, PauseReason.UNREACHABLE)

    hold.reason, hold.pause_reason = f"{TOKEN_ENDPOINT_DOWN}: 3 consecutive failure(s)", ""
    hold.save()
    listed = DestinationHealth.objects.paused_by_breaker().get(name="receiver")
    assert listed.breaker_pause_reason == PauseReason.UNREACHABLE
    assert listed.breaker_pause_words == "unreachable (connection failures or 5xx)"
    assert [c.cause for c in destination_causes()] == ["destination:receiver:unreachable"]


def test_one_probe_call_at_a_time_and_its_success_resumes_the_destination(make_handoff):
    for n in range(1, 5):
        make_handoff(n)
    destination = ScriptedDestination(refused())
    dispatch_batch(destination=destination, limit=1)
    open_probe_now()
    probe = dispatch_batch(destination=destination)
    assert probe.claimed == 1 and probe.delivered == 1
    assert (health().state, health().consecutive_failures) == (D.ACTIVE, 0)
    drain(destination=destination)
    assert Handoff.objects.filter(state=S.DELIVERED).count() == 4
    assert ReceiverTask.objects.count() == 4
    assert list(DestinationEvent.objects.order_by("id").values_list("to_state", flat=True)) == [
        D.PAUSED,
        D.ACTIVE,
    ]


def test_a_failed_probe_keeps_the_destination_paused_and_waits_longer(make_handoff):
    make_handoff(1), make_handoff(2)
    destination = ScriptedDestination(refused(), refused())
    dispatch_batch(destination=destination, limit=1)
    first_wait = health().next_probe_at - health().paused_at
    open_probe_now()
    assert dispatch_batch(destination=destination).claimed == 1
    assert health().state == D.PAUSED and health().probes == 1
    assert dispatch_batch(destination=destination).paused
    # Both times are the database's: the second wait, from the pause, is longer than the first.
    assert health().next_probe_at - health().paused_at > first_wait


def test_an_outage_hands_no_handoff_to_a_person(make_handoff):
    for n in range(1, 11):
        make_handoff(n)
    destination = ScriptedDestination(*[unreachable() for _ in range(6)])
    for _ in range(20):
        open_probe_now()
        Handoff.objects.filter(state=S.PENDING).update(
            next_attempt_at=timezone.now() - timedelta(seconds=1)
        )
        drain(destination=destination)
    assert Handoff.objects.filter(state=S.NEEDS_ATTENTION).count() == 0
    assert Handoff.objects.filter(state=S.DELIVERED).count() == 10
    assert health().state == D.ACTIVE


def test_transient_failures_go_on_within_the_retry_window_however_many(make_handoff):
    handoff = make_handoff()
    policy = RetryPolicy(window_seconds=3600, base_delay=0, max_delay=0)
    failures = [
        DeliveryResult.failed(FailureClass.TRANSIENT, "rate_limited", "slow down", status_code=429)
    ] * 12
    destination = ScriptedDestination(*failures, policy=policy)
    drain(destination=destination)
    handoff.refresh_from_db()
    assert (handoff.state, handoff.attempts) == (S.DELIVERED, 13)


def test_a_handoff_past_its_retry_window_needs_a_person(make_handoff):
    handoff = make_handoff()
    Handoff.objects.filter(pk=handoff.pk).update(run_started_at=timezone.now() - timedelta(hours=2))
    policy = RetryPolicy(window_seconds=3600, base_delay=0, max_delay=0)
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.TRANSIENT, "rate_limited", "slow down", status_code=429),
        policy=policy,
    )
    dispatch_batch(destination=destination)
    handoff.refresh_from_db()
    assert (handoff.state, handoff.reason_code) == (S.NEEDS_ATTENTION, "retries_exhausted")
    assert "retry window" in handoff.last_error


class StealingDestination(ScriptedDestination):
    """While the first call is out, another worker takes over the second claim (expired lease, settled,
    claimed again): what a slow call on a loaded machine can let happen."""

    def deliver(self, outgoing):
        if self.calls == 0:
            other = Handoff.objects.exclude(action_key=outgoing.action_key).get()
            Handoff.objects.filter(pk=other.pk).update(
                state=S.PENDING,
                lease_owner="",
                lease_expires_at=None,
                next_attempt_at=timezone.now() - timedelta(seconds=1),
            )
            from outbox.services import handoff_claim_due

            assert len(handoff_claim_due(worker="w2", handoff_id=other.pk)) == 1
        return super().deliver(outgoing)


def test_no_call_leaves_after_its_lease_passed_to_another_worker(make_handoff, settings):
    make_handoff(1), make_handoff(2)
    destination = StealingDestination()
    # A call may last longer than the rest of the lease, so the lease is checked before every call.
    destination.call_seconds = settings.HANDOFF_LEASE_SECONDS
    stats = dispatch_batch(destination=destination, worker="w1")
    assert destination.calls == 1
    assert stats.lease_lost == 1
    assert Handoff.objects.filter(state=S.IN_FLIGHT, lease_owner="w2").count() == 1


def test_the_rest_of_a_claimed_batch_is_given_back_unsent_when_the_destination_is_paused(
    make_handoff,
):
    handoffs = [make_handoff(n) for n in range(1, 6)]
    destination = ScriptedDestination(refused())
    stats = dispatch_batch(destination=destination)
    assert stats.claimed == 5 and destination.calls == 1 and stats.released == 4
    rest = Handoff.objects.filter(pk__in=[h.pk for h in handoffs]).exclude(
        attempt_set__outcome="failed"
    )
    assert rest.count() == 4
    assert set(rest.values_list("state", "attempts_in_run")) == {(S.PENDING, 0)}
    assert set(rest.values_list("attempt_set__outcome", flat=True)) == {"skipped"}


def test_the_destinations_outage_does_not_spend_a_handoffs_attempts(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(
        unreachable(),
        unreachable(),
        unreachable(),
        unreachable(),
        policy=RetryPolicy(max_attempts=2, base_delay=0, max_delay=0),
    )
    for _ in range(4):
        open_probe_now()
        dispatch_batch(destination=destination)
    handoff.refresh_from_db()
    assert (handoff.state, handoff.attempts, handoff.attempts_in_run) == (S.PENDING, 4, 0)
