"""The truth of the counts claimed on the observation pages (`observation.<count>`), the audit export's form
(`audit.exportable`), the incident page's members in the viewer's view (`incident.members_in_view`,
`incident.settled_in_view`), a handoff's attempts (`handoff.attempts_made`), and a workflow's mode and whether
a workspace's handoffs of it are sent (`workflow.mode`, `workflow.sends_here`). Counted from the rows
themselves (`values()`), never from the selectors or counters the screens read."""

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model

from approvals.models import Membership, ObservedOutcome, WorkflowMode, Workspace
from incidents.models import Incident, IncidentMember
from outbox.models import Attempt, Handoff

Check = Callable[[object, str], set[str] | None]


def _parts(subject: str, kind: str) -> list[str] | None:
    head, _, rest = subject.partition(":")
    return rest.split("|") if head == kind and rest else None


def observation_counts(ws: int, rule_version: str) -> dict[str, int] | None:
    """A rule version's observed cases in a workspace beside the current recordings of what the current
    process did: counted from the rows (the cases observed; the newest recording of each case)."""
    cases = set(
        Handoff.objects.filter(
            workspace_id=ws, rule_version=rule_version, state="observed"
        ).values_list("action_key", flat=True)
    )
    rows = list(
        ObservedOutcome.objects.filter(
            workspace_id=ws, rule_version=rule_version, current=True
        ).values("action_key", "agrees", "explained_at")
    )
    if not cases and not rows:
        return None
    agree = sum(1 for r in rows if r["agrees"])
    return {
        "observed": len(cases),
        "recorded": len(rows),
        "agree": agree,
        "disagree": len(rows) - agree,
        "unexplained": sum(1 for r in rows if not r["agrees"] and r["explained_at"] is None),
        "not_recorded": len(cases - {r["action_key"] for r in rows}),
    }


def _observation(field: str) -> Check:
    def check(_truth, subject: str) -> set[str] | None:
        parts = _parts(subject, "observation")
        if parts is None or len(parts) != 2 or not parts[0].isdigit():
            return None
        counts = observation_counts(int(parts[0]), parts[1])
        return None if counts is None else {str(counts[field])}

    return check


def _exportable(_truth, subject: str) -> set[str] | None:
    """Support staff may export any workspace; anyone else a workspace they are an operator of."""
    parts = _parts(subject, "user")
    if parts is None or len(parts) != 2 or not parts[1].startswith("workspace:"):
        return None
    pk = parts[1].removeprefix("workspace:")
    user = get_user_model().objects.filter(username=parts[0]).values("pk", "is_staff").first()
    if user is None or not pk.isdigit() or not Workspace.objects.filter(pk=int(pk)).exists():
        return None
    if user["is_staff"]:
        return {"yes"}
    member = Membership.objects.filter(user_id=user["pk"], workspace_id=int(pk), role="operator")
    return {"yes" if member.exists() else "no"}


def _members_in_view(settled: bool) -> Check:
    """`incident:<pk>|ws:7,8` (`none`: members of no workspace): the incident's members of those workspaces."""

    def check(_truth, subject: str) -> set[str] | None:
        parts = _parts(subject, "incident")
        if parts is None or len(parts) != 2 or not parts[0].isdigit():
            return None
        if not parts[1].startswith("ws:") or not Incident.objects.filter(pk=int(parts[0])).exists():
            return None
        scope = [w for w in parts[1].removeprefix("ws:").split(",") if w]
        rows = IncidentMember.objects.filter(incident_id=int(parts[0])).values(
            "workspace_id", "settled_at"
        )
        ids = {int(w) for w in scope if w.isdigit()}
        seen = [
            r
            for r in rows
            if r["workspace_id"] in ids or (r["workspace_id"] is None and "none" in scope)
        ]
        if settled:
            seen = [r for r in seen if r["settled_at"] is not None]
        return {str(len(seen))}

    return check


def _attempts_made(_truth, subject: str) -> set[str] | None:
    """The handoff's attempt rows, but for a send skipped (a hold, a lease that expired before the call)
    and a paused destination's probe that found it still down (the destination's call, not the handoff's)."""
    parts = _parts(subject, "handoff")
    if parts is None or len(parts) != 1 or not parts[0].isdigit():
        return None
    pk = int(parts[0])
    if not Handoff.objects.filter(pk=pk).exists():
        return None
    rows = Attempt.objects.filter(handoff_id=pk).values("outcome", "detail")
    own = [
        r
        for r in rows
        if r["outcome"] != "skipped" and not r["detail"].startswith("probe of destination")
    ]
    return {str(len(own))}


def _workflow_mode(_truth, subject: str) -> set[str] | None:
    """`workflow:<name>`: its stored mode row's, else the mode a workflow without one runs in."""
    parts = _parts(subject, "workflow")
    if parts is None or len(parts) != 1:
        return None
    stored = WorkflowMode.objects.filter(workflow=parts[0]).values_list("mode", flat=True).first()
    return {stored or settings.WORKFLOW_DEFAULT_MODE}


def _sends_here(_truth, subject: str) -> set[str] | None:
    """`workflow:<name>|ws:<pk>`: live sends everywhere, limited only for its allowed workspaces, observe
    nowhere; a workflow without a mode row runs in `WORKFLOW_DEFAULT_MODE`."""
    parts = _parts(subject, "workflow")
    if parts is None or len(parts) != 2 or not parts[1].removeprefix("ws:").isdigit():
        return None
    row = WorkflowMode.objects.filter(workflow=parts[0]).values("pk", "mode").first()
    mode = row["mode"] if row else settings.WORKFLOW_DEFAULT_MODE
    if mode == "limited" and row is not None:
        allowed = WorkflowMode.allowed_workspaces.through.objects.filter(
            workflowmode_id=row["pk"], workspace_id=int(parts[1].removeprefix("ws:"))
        )
        return {"yes" if allowed.exists() else "no"}
    return {"yes" if mode == "live" else "no"}


FIELDS = ("observed", "recorded", "agree", "disagree", "unexplained", "not_recorded")
COUNT_CHECKS: dict[str, Check] = {
    **{f"observation.{field}": _observation(field) for field in FIELDS},
    "audit.exportable": _exportable,
    "incident.members_in_view": _members_in_view(settled=False),
    "incident.settled_in_view": _members_in_view(settled=True),
    "handoff.attempts_made": _attempts_made,
    "workflow.mode": _workflow_mode,
    "workflow.sends_here": _sends_here,
}
