"""A credential hold starts when refusals persist (issue 36, item 7): N refusals in a row, or refusals over a
share of the destination's recent calls (`outbox/services/credential_share.py`), never at a stray one. The
hold is a `DestinationHold` row until a probe succeeds, set by the breaker; it ends no other hold."""

import pytest

from outbox.clock import db_now_plus
from outbox.dispatch.dispatcher import dispatch_batch
from outbox.failures import DeliveryResult
from outbox.models import (
    Attempt,
    DestinationHealth,
    DestinationHold,
    DestinationState,
    FailureClass,
    Handoff,
    HandoffState,
    HoldKind,
    PauseReason,
)
from outbox.services.breaker import destination_answered
from outbox.services.destination_windows import destination_pause_by_operator
from tests.factories import make_user
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


@pytest.fixture(autouse=True)
def credential_settings(settings):
    # The production defaults (config/settings): the suite's own settings hold on one refusal.
    settings.HANDOFF_BREAKER_CREDENTIAL_THRESHOLD = 3
    settings.HANDOFF_BREAKER_CREDENTIAL_SHARE = 0.2
    settings.HANDOFF_BREAKER_CREDENTIAL_WINDOW_SECONDS = 600.0
    settings.HANDOFF_BREAKER_CREDENTIAL_MIN_CALLS = 20
    settings.HANDOFF_BREAKER_PROBE_BASE = 600.0
    settings.HANDOFF_BREAKER_PROBE_CAP = 600.0


def refused():
    return DeliveryResult.failed(
        FailureClass.CREDENTIAL, "credential_rejected", "HTTP 401", status_code=401
    )


class RefusingShare(ScriptedDestination):
    """One call per handoff; the calls whose number (from 0) modulo `every` is in `refused_at` are answered
    401, the others delivered by the real in-process receiver."""

    def __init__(self, every: int, refused_at: set[int]):
        super().__init__(supports_batch=False)
        self.every, self.refused_at, self.answers = every, refused_at, []

    def deliver(self, outgoing):
        number = self.calls
        self.calls += 1
        if number % self.every in self.refused_at:
            self.answers.append(False)
            return refused()
        self.answers.append(True)
        return super(ScriptedDestination, self).deliver(outgoing)


def most_refused_in_a_row(answers: list[bool]) -> int:
    run = most = 0
    for delivered in answers:
        run = 0 if delivered else run + 1
        most = max(most, run)
    return most


def run_until_quiet(destination, rounds: int = 200) -> None:
    for _ in range(rounds):
        Handoff.objects.filter(state=S.PENDING).update(next_attempt_at=db_now_plus(-1))
        stats = dispatch_batch(destination=destination, limit=5)
        if stats.claimed == 0:
            return


def credential_holds():
    return DestinationHold.objects.filter(destination="receiver", kind=HoldKind.CREDENTIAL)


def test_a_sustained_thirty_percent_share_of_refusals_holds_it_though_never_three_in_a_row(
    make_handoff,
):
    for n in range(1, 101):
        make_handoff(n)
    destination = RefusingShare(10, {0, 3, 6})
    run_until_quiet(destination)
    # Never three refusals in a row: the consecutive rule alone would never have held it.
    assert most_refused_in_a_row(destination.answers) == 1
    [hold] = credential_holds()
    assert hold.until_probe and hold.ended_at is None and hold.set_by == "the breaker"
    assert "of the last" in hold.reason and "refused credentials" in hold.reason
    health = DestinationHealth.objects.get(name="receiver")
    assert (health.state, health.pause_reason) == (DestinationState.PAUSED, PauseReason.CREDENTIAL)
    # Held after the window's minimum of calls, not after the hundred handoffs: the rest wait.
    assert 20 <= destination.calls <= 30
    assert Handoff.objects.filter(state=S.PENDING).count() > 70
    assert not Handoff.objects.filter(state=S.NEEDS_ATTENTION).exists()


def test_one_percent_of_calls_refused_never_holds_it_and_costs_one_call_in_a_hundred(make_handoff):
    handoffs = [make_handoff(n) for n in range(1, 301)]
    destination = RefusingShare(100, {50})
    run_until_quiet(destination)
    assert not DestinationHold.objects.exists()
    assert Handoff.objects.filter(state=S.DELIVERED).count() == len(handoffs)
    # The rate as counts: handoffs delivered per call made, against one per call without the refusals.
    assert len(handoffs) / Attempt.objects.count() >= 0.9
    assert Attempt.objects.filter(failure_class=FailureClass.CREDENTIAL).count() == 3


def test_every_call_refused_holds_it_after_the_consecutive_threshold(make_handoff):
    for n in range(1, 21):
        make_handoff(n)
    destination = RefusingShare(1, {0})
    run_until_quiet(destination)
    assert destination.calls == 3
    [hold] = credential_holds()
    assert hold.reason.startswith("3 consecutive failure(s): credential_rejected")


def test_the_credential_hold_leaves_an_operators_pause_and_its_end_leaves_it_too(make_handoff):
    for n in range(1, 21):
        make_handoff(n)
    run_until_quiet(RefusingShare(1, {0}))
    olga = make_user("olga")
    pause = destination_pause_by_operator(name="receiver", actor=olga, reason="upgrade")
    assert credential_holds().get().ended_at is None
    # A probe that succeeds ends the breaker's hold only; the operator's pause stays, and holds.
    assert destination_answered(name="receiver", what="a lookup")
    assert credential_holds().get().ended_at is not None
    pause.refresh_from_db()
    assert pause.ended_at is None
    assert DestinationHold.objects.live().filter(pk=pause.pk).exists()
    assert dispatch_batch(destination=RefusingShare(1, set()), limit=5).claimed == 0


def test_the_share_counts_from_the_end_of_the_last_credential_hold(make_handoff):
    for n in range(1, 41):
        make_handoff(n)
    run_until_quiet(RefusingShare(1, {0}))
    destination_answered(name="receiver", what="a lookup")
    # The three refusals before the hold are not counted again: 1 in 10 now holds nothing.
    destination = RefusingShare(10, {5})
    run_until_quiet(destination)
    assert credential_holds().count() == 1
    assert Handoff.objects.filter(state=S.DELIVERED).count() == 40
