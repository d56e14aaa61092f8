"""Reads of findings, repairs and runs for the findings screens, the handoff page and /metrics."""

from collections.abc import Iterable

from django.db.models import Count, Q, QuerySet

from outbox.models import Handoff
from reconciliation.models import (
    Finding,
    FindingKind,
    FindingStatus,
    ManualRepair,
    ReconciliationRun,
    RunStatus,
)
from reconciliation.selectors.scope import scoped

# The findings filter's default: every finding not resolved (`FindingQuerySet.live`).
LIVE = "live"


def live_findings_of(action_key: str) -> QuerySet[Finding]:
    return Finding.objects.live().filter(action_key=action_key).order_by("kind", "id")


def repairs_of(handoff: Handoff) -> QuerySet[ManualRepair]:
    return ManualRepair.objects.filter(
        workspace_id=handoff.workspace_id, action_key=handoff.action_key
    ).order_by("at", "id")


def last_run(workspace_id: int | None = None) -> ReconciliationRun | None:
    """The last finished full run, or, given a workspace, the last one that covered it (full or its own)."""
    runs = ReconciliationRun.objects.exclude(status=RunStatus.RUNNING)
    covered = Q(workspace_id__isnull=True)
    if workspace_id is not None:
        covered |= Q(workspace_id=workspace_id)
    return runs.filter(covered).order_by("-started_at", "-id").first()


def runs_visible_to(workspace_ids: list[int]) -> QuerySet[ReconciliationRun]:
    """Full runs and the workspace runs of the user's workspaces."""
    return ReconciliationRun.objects.filter(
        Q(workspace_id__isnull=True) | Q(workspace_id__in=workspace_ids)
    )


def live_findings(workspace_ids: Iterable[int] | None) -> QuerySet[Finding]:
    """Findings that are not resolved: what the last completed run still sees (it resolves the rest)."""
    return scoped(Finding.objects.live(), workspace_ids)


def findings_by_kind(workspace_ids: Iterable[int] | None) -> dict[str, int]:
    counts = dict(
        live_findings(workspace_ids).order_by().values_list("kind").annotate(n=Count("id"))
    )
    return {kind: counts.get(kind, 0) for kind in FindingKind.values}


def findings_visible_to(
    workspace_ids: list[int], *, include_unscoped: bool = False
) -> QuerySet[Finding]:
    """Findings of the user's workspaces; one with no workspace (an orphan with a foreign key) only for staff."""
    condition = Q(workspace_id__in=workspace_ids)
    if include_unscoped:
        condition |= Q(workspace_id__isnull=True)
    return Finding.objects.filter(condition).select_related(
        "acknowledged_by", "resolved_by", "last_run"
    )


def findings_filtered(
    findings: QuerySet,
    *,
    status: str = LIVE,
    kind: str = "",
    workspace: int | None = None,
    text: str = "",
    outcome_validation: bool = False,
) -> QuerySet:
    """The findings list's filter, newest first: "live" is everything not resolved; unknown values are ignored."""
    if status == LIVE:
        findings = findings.live()
    elif status in FindingStatus.values:
        findings = findings.filter(status=status)
    if kind in FindingKind.values:
        findings = findings.filter(kind=kind)
    if outcome_validation:
        findings = findings.filter(outcome_validation=True)
    if workspace:
        findings = findings.filter(workspace_id=workspace)
    if text.strip():
        findings = findings.filter(action_key__icontains=text.strip())
    return findings.select_related("owner").order_by("-last_seen_at", "-id")
