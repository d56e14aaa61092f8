"""The safest next step for each state, and the actions offered for it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.guidance import available_actions, next_step, retry_is_risky
from outbox.models import FailureClass, Handoff, HandoffState

# The advice for an unknown outcome reads its destination's contract (does it replay the same key?).
pytestmark = pytest.mark.django_db
S = HandoffState
F = FailureClass


def handoff(state, failure_class="", **fields) -> Handoff:
    return Handoff(
        action_key="onboarding:7:42:1",
        state=state,
        failure_class=failure_class,
        destination_id=fields.pop("destination_id", ""),
        **fields,
    )


@pytest.mark.parametrize(
    ("h", "recommended", "headline_has"),
    [
        (handoff(S.UNCERTAIN, F.UNCERTAIN), "reconcile", "reconcile first"),
        (handoff(S.NEEDS_ATTENTION, F.UNCERTAIN), "reconcile", "reconcile"),
        (handoff(S.NEEDS_ATTENTION, F.MALFORMED), "reconcile", "reconcile"),
        (
            handoff(S.NEEDS_ATTENTION, F.PERMANENT, reason_code="payload_invalid"),
            "correct",
            "correct it",
        ),
        (handoff(S.NEEDS_ATTENTION, F.CONFLICT), "correct", "do not send again"),
        (handoff(S.NEEDS_ATTENTION, F.CREDENTIAL), "retry", "credentials"),
        (
            handoff(S.NEEDS_ATTENTION, F.TRANSIENT, reason_code="retries_exhausted"),
            "retry",
            "Retries ran out",
        ),
        # Built when the test runs (not at collection), so that "in three minutes" is still ahead.
        (
            lambda: handoff(
                S.PENDING,
                F.TRANSIENT,
                attempts=2,
                next_attempt_at=timezone.now() + timedelta(minutes=3),
            ),
            "run_now",
            "temporary failure",
        ),
        (handoff(S.PENDING), "", "Queued"),
        (handoff(S.IN_FLIGHT), "", "Being sent"),
        (handoff(S.DELIVERED, destination_id="t-1"), "", "Delivered"),
        (handoff(S.SUPERSEDED), "", "Replaced"),
        (handoff(S.CANCELLED), "", "Cancelled"),
    ],
)
def test_next_step_for_each_state(h, recommended, headline_has):
    h = h() if callable(h) else h
    guidance = next_step(h)
    assert guidance.recommended == recommended
    assert headline_has in guidance.headline
    if recommended:
        assert recommended in available_actions(h)


def test_delivered_says_the_task_exists_not_that_the_work_is_done():
    guidance = next_step(handoff(S.DELIVERED, destination_id="task-9"))
    assert (
        "task-9" in guidance.detail
        and "does not mean the onboarding work is finished" in guidance.detail
    )


def test_uncertain_warns_against_sending_again():
    h = handoff(S.UNCERTAIN, F.UNCERTAIN)
    assert retry_is_risky(h)
    assert "retry" in next_step(h).avoid
    assert available_actions(h)[0] == "reconcile"


def test_unacknowledged_failure_offers_acknowledge_first():
    h = handoff(S.NEEDS_ATTENTION, F.TRANSIENT)
    assert available_actions(h)[0] == "acknowledge"
    assert "Acknowledge it first" in next_step(h).detail
    h.acknowledged_at = timezone.now()
    assert "acknowledge" not in available_actions(h)


@pytest.mark.parametrize("state", [S.DELIVERED, S.SUPERSEDED, S.CANCELLED, S.OBSERVED])
def test_closed_handoffs_offer_only_reconcile_now(state):
    # A read of the receiver (a task may exist for a closed key); nothing that sends or changes state.
    assert available_actions(handoff(state)) == ["reconcile_now"]


class OpenFinding:
    next_action = "Ask the receiving team what happened to the task."

    def get_kind_display(self) -> str:
        return "Missing at the receiver"


def test_an_open_finding_overrides_nothing_to_do_and_offers_the_repair():
    h = handoff(S.DELIVERED, destination_id="t-1")
    guidance = next_step(h, [OpenFinding()])
    assert "Nothing to do" not in guidance.headline
    assert guidance.headline == "Reconciliation found a problem: missing at the receiver."
    assert guidance.detail.startswith("Ask the receiving team") and guidance.recommended == "repair"
    assert available_actions(h, [OpenFinding()])[:2] == ["reconcile_now", "repair"]


def test_unknown_outcome_offers_the_manual_settle():
    assert "repair" in available_actions(
        handoff(S.NEEDS_ATTENTION, F.UNCERTAIN, reason_code="lookup_unsupported")
    )
    assert "repair" not in available_actions(handoff(S.NEEDS_ATTENTION, F.PERMANENT))


def test_a_permanent_rejection_offers_no_retry():
    """Sending the same payload again is refused the same way, as the guidance itself says."""
    h = handoff(S.NEEDS_ATTENTION, F.PERMANENT, reason_code="payload_invalid")
    assert "retry" not in available_actions(h)
    assert "retry" in next_step(h).avoid


def test_run_now_is_not_offered_while_the_destination_takes_no_call():
    waiting = handoff(
        S.PENDING,
        F.TRANSIENT,
        attempts=1,
        reason_code="connect_failed",
        next_attempt_at=timezone.now() + timedelta(minutes=5),
    )
    assert "run_now" in available_actions(waiting)
    assert "run_now" not in available_actions(waiting, destination_held=True)


def test_a_retry_after_hold_says_until_when_instead_of_within_seconds():
    from outbox.hold_lines import DestinationHolds, HoldLine
    from outbox.models import HoldKind

    queued = handoff(S.PENDING)
    assert "within seconds" in next_step(queued).detail
    # As `outbox/hold_lines.py` reads it from its Retry-After hold.
    line = HoldLine(
        kind=HoldKind.RETRY_AFTER.label,
        reason="HTTP 429 with Retry-After 54 s",
        since=timezone.now(),
        until="2026-12-05 10:00:54 UTC",
        who="the dispatcher",
        code=HoldKind.RETRY_AFTER,
    )
    guidance = next_step(queued, holds=DestinationHolds("receiver", [line], None))
    assert guidance.headline == "Waiting: destination receiver is held."
    assert f"Holds: {line.words}." in guidance.detail
    assert "until 2026-12-05 10:00:54 UTC" in guidance.detail
    assert "within seconds" not in guidance.detail
