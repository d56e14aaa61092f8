"""The rules behind the health figures, written once: the dashboard (`health`) and /metrics both count
with them, so a figure means the same on the page and in Prometheus."""

from datetime import datetime, timedelta

from django.db.models import Count, Q, QuerySet

from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffEvent, HandoffState

FAILED_OUTCOMES = (AttemptOutcome.FAILED, AttemptOutcome.UNCERTAIN, AttemptOutcome.ABANDONED)
ACK_WINDOW = timedelta(days=30)
ACK_SAMPLE_CAP = 10_000
RETRIES_EXHAUSTED = "retries_exhausted"


def acknowledged_recently(handoffs: QuerySet[Handoff], *, now: datetime) -> QuerySet[Handoff]:
    """Failures of the last 30 days that were acknowledged, newest first (sample at most ACK_SAMPLE_CAP)."""
    return handoffs.filter(
        attention_since__gte=now - ACK_WINDOW, acknowledged_at__isnull=False
    ).order_by("-attention_since")


def ack_seconds(failed: datetime, acknowledged: datetime) -> float:
    return max((acknowledged - failed).total_seconds(), 0.0)


def retries_exhausted(handoffs: QuerySet[Handoff]) -> QuerySet[Handoff]:
    return handoffs.filter(reason_code=RETRIES_EXHAUSTED)


def failure_rate_base(handoffs: QuerySet[Handoff]) -> QuerySet[Handoff]:
    """The handoffs a failure rate counts: every one that was meant to be sent."""
    return handoffs.exclude(state=HandoffState.OBSERVED)


def failure_counts() -> dict:
    """Annotations of a failure rate: handoffs, and how many ever needed attention."""
    return {"total": Count("id"), "failed": Count("id", filter=Q(attention_since__isnull=False))}


def duplicate_preventions(attempts: QuerySet[Attempt]) -> QuerySet[Attempt]:
    """Attempts answered with the existing task: a second effect prevented."""
    return attempts.filter(outcome=AttemptOutcome.DUPLICATE)


def failed_attempts(attempts: QuerySet[Attempt]) -> QuerySet[Attempt]:
    return attempts.filter(outcome__in=FAILED_OUTCOMES)


def interventions(events: QuerySet[HandoffEvent]) -> QuerySet[HandoffEvent]:
    """Operator actions on handoffs (`HandoffEventQuerySet.interventions`, the one rule), of `events`."""
    return events.interventions()


def rate(failed: int, total: int) -> float:
    return failed / total if total else 0.0
