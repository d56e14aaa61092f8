"""Reads of triggers for the console, scoped to the user's workspaces."""

from datetime import datetime

from approvals.models import TriggerRecord
from approvals.selectors import workspace_ids_for
from lib.paging import keyset_page


def triggers_visible_to(
    user,
    *,
    reference: str = "",
    outcome: str = "",
    before: tuple[datetime, int] | None = None,
    limit: int = 50,
) -> tuple[list[TriggerRecord], bool]:
    """Triggers of the user's workspaces, newest first, one keyset page at a time (and whether more follow)."""
    rows = TriggerRecord.objects.filter(workspace_ref__in=workspace_ids_for(user)).select_related(
        "request"
    )
    if reference:
        rows = rows.filter(reference__icontains=reference)
    if outcome:
        rows = rows.filter(outcome=outcome)
    return keyset_page(rows, after=before, size=limit, field="received_at")


def trigger_visible_to(user, pk: int) -> TriggerRecord | None:
    return (
        TriggerRecord.objects.filter(pk=pk, workspace_ref__in=workspace_ids_for(user))
        .select_related("request", "duplicate_of")
        .first()
    )
