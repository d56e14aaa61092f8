"""The workspaces in scope of a read: callers pass them; `None` means every workspace (only /metrics,
behind its token, reads that)."""

from collections.abc import Iterable

from django.db.models import QuerySet

from outbox.models import Handoff


def scoped(
    queryset: QuerySet, workspace_ids: Iterable[int] | None, field: str = "workspace_id"
) -> QuerySet:
    if workspace_ids is None:
        return queryset
    return queryset.filter(**{f"{field}__in": list(workspace_ids)})


def handoffs_scoped(workspace_ids: Iterable[int] | None) -> QuerySet[Handoff]:
    """The business handoffs of the workspaces: Health counts the product's alert notifications apart."""
    return scoped(Handoff.objects.business(), workspace_ids)
