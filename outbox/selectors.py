"""Reads of the outbox shared by console views and metrics. Callers pass the workspaces in scope."""

from collections.abc import Iterable

from django.db.models import Count, QuerySet

from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffEvent, HandoffState


def handoffs_in(workspace_ids: Iterable[int]) -> QuerySet[Handoff]:
    return Handoff.objects.filter(workspace_id__in=list(workspace_ids)).select_related("owner")


def handoff_timeline(handoff: Handoff) -> tuple[QuerySet[Attempt], QuerySet[HandoffEvent]]:
    return (
        handoff.attempt_set.order_by("number"),
        handoff.events.select_related("actor").order_by("at", "id"),
    )


def delivery_counters(workspace_ids: Iterable[int] | None = None) -> dict:
    """Attempts by outcome, duplicate-effect preventions, retry exhaustion, and how uncertain
    outcomes were settled."""
    attempts = Attempt.objects.all()
    handoffs = Handoff.objects.all()
    events = HandoffEvent.objects.all()
    if workspace_ids is not None:
        ids = list(workspace_ids)
        attempts = attempts.filter(handoff__workspace_id__in=ids)
        handoffs = handoffs.filter(workspace_id__in=ids)
        events = events.filter(handoff__workspace_id__in=ids)
    by_outcome = dict(attempts.order_by().values_list("outcome").annotate(n=Count("id")))
    settled = dict(
        events.filter(from_state=HandoffState.UNCERTAIN).exclude(to_state=HandoffState.UNCERTAIN)
        .order_by().values_list("to_state").annotate(n=Count("id"))
    )
    return {
        "attempts_by_outcome": by_outcome,
        "duplicate_effect_preventions": by_outcome.get(AttemptOutcome.DUPLICATE, 0),
        "retry_exhausted": handoffs.filter(reason_code="retries_exhausted").count(),
        "uncertain_settled": settled,
    }
