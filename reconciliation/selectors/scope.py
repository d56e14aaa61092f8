"""The workspaces in scope of a read: callers pass them; `None` means every workspace (only /metrics,
behind its token, reads that)."""

from collections.abc import Iterable

from django.db.models import QuerySet

from outbox.models import Attempt, Handoff, HandoffEvent
from outbox.models.handoffs import business_condition


def scoped(
    queryset: QuerySet, workspace_ids: Iterable[int] | None, field: str = "workspace_id"
) -> QuerySet:
    if workspace_ids is None:
        return queryset
    return queryset.filter(**{f"{field}__in": list(workspace_ids)})


def handoffs_scoped(workspace_ids: Iterable[int] | None) -> QuerySet[Handoff]:
    """The business handoffs of the workspaces: Health counts the product's alert notifications apart."""
    return scoped(Handoff.objects.business(), workspace_ids)


def attempts_scoped(workspace_ids: Iterable[int] | None) -> QuerySet[Attempt]:
    """The attempts of the workspaces' business handoffs (`business_condition`, through the join the
    workspace filter takes anyway): Health's attempt figures leave the alert notifications' out."""
    attempts = Attempt.objects.filter(business_condition("handoff__"))
    return scoped(attempts, workspace_ids, "handoff__workspace_id")


def events_scoped(workspace_ids: Iterable[int] | None) -> QuerySet[HandoffEvent]:
    """The events of the workspaces' business handoffs, as `attempts_scoped`."""
    events = HandoffEvent.objects.filter(business_condition("handoff__"))
    return scoped(events, workspace_ids, "handoff__workspace_id")
