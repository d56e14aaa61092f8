"""Where each kind of audited event is stored, read for one workspace and period.

Each kind names the Django permission that lets staff read those rows in admin: support staff export
only the kinds their group may view; operators of the workspace export every kind. Events that apply to
every workspace (a destination's pauses and limits, a workflow's mode) are in every workspace's trail."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from approvals.models import (
    Approval,
    AuditExport,
    ObservedOutcome,
    RequestEvent,
    RoleChange,
    WorkflowModeChange,
)
from console.audit_trail.records import AuditRecord
from incidents.models import IncidentEvent
from outbox.models import DestinationEvent, Erasure, HandoffEvent
from reconciliation.models import FindingEvent, ManualRepair


@dataclass(frozen=True)
class Period:
    workspace_id: int
    start: datetime
    end: datetime  # exclusive


def _who(user, label: str = "") -> str:
    return user.get_username() if user is not None else (label or "system")


def _request_events(p: Period) -> Iterable[AuditRecord]:
    rows = RequestEvent.objects.filter(
        request__workspace_id=p.workspace_id, at__gte=p.start, at__lt=p.end
    ).select_related("request", "actor")
    for e in rows:
        yield AuditRecord(
            at=e.at,
            kind="request_event",
            record=f"request_event:{e.pk}",
            workspace=p.workspace_id,
            actor=_who(e.actor),
            action="transition",
            subject=f"request {e.request.number} revision {e.request.revision}",
            before=e.from_state,
            after=e.to_state,
            reason=e.reason,
        )


def _decisions(p: Period) -> Iterable[AuditRecord]:
    rows = Approval.objects.filter(
        request__workspace_id=p.workspace_id, decided_at__gte=p.start, decided_at__lt=p.end
    ).select_related("request", "decided_by")
    for d in rows:
        yield AuditRecord(
            at=d.decided_at,
            kind="decision",
            record=f"decision:{d.pk}",
            workspace=p.workspace_id,
            actor=_who(d.decided_by),
            action=d.decision,
            subject=f"request {d.request.number} revision {d.revision} "
            f"(payload {d.payload_hash[:12]}, rules {d.rule_version})",
            before="awaiting decision",
            after=d.decision,
            reason=d.reason,
        )


def _role_changes(p: Period) -> Iterable[AuditRecord]:
    rows = RoleChange.objects.filter(
        workspace_id=p.workspace_id, changed_at__gte=p.start, changed_at__lt=p.end
    ).select_related("user", "changed_by")
    for c in rows:
        granted = c.action == RoleChange.Action.GRANT
        yield AuditRecord(
            at=c.changed_at,
            kind="role_change",
            record=f"role_change:{c.pk}",
            workspace=p.workspace_id,
            actor=_who(c.changed_by),
            action=c.action,
            subject=f"{c.user.get_username()} as {c.role}",
            before="" if granted else c.role,
            after=c.role if granted else "",
            reason=c.reason,
        )


def _handoff_events(p: Period) -> Iterable[AuditRecord]:
    rows = HandoffEvent.objects.filter(
        handoff__workspace_id=p.workspace_id, at__gte=p.start, at__lt=p.end
    ).select_related("handoff", "actor")
    for e in rows:
        yield AuditRecord(
            at=e.at,
            kind="handoff_event",
            record=f"handoff_event:{e.pk}",
            workspace=p.workspace_id,
            actor=_who(e.actor, e.actor_label),
            action=e.action or "transition",
            subject=e.handoff.action_key,
            before=e.from_state,
            after=e.to_state,
            reason=e.reason,
        )


def _finding_events(p: Period) -> Iterable[AuditRecord]:
    rows = FindingEvent.objects.filter(
        finding__workspace_id=p.workspace_id, at__gte=p.start, at__lt=p.end
    ).select_related("finding", "actor")
    for e in rows:
        yield AuditRecord(
            at=e.at,
            kind="finding_event",
            record=f"finding_event:{e.pk}",
            workspace=p.workspace_id,
            actor=_who(e.actor, e.actor_label),
            action=e.action,
            subject=f"{e.finding.kind} {e.finding.action_key}",
            before=e.from_status,
            after=e.to_status,
            reason=e.note,
        )


def _repairs(p: Period) -> Iterable[AuditRecord]:
    rows = ManualRepair.objects.filter(
        workspace_id=p.workspace_id, at__gte=p.start, at__lt=p.end
    ).select_related("actor")
    for r in rows:
        yield AuditRecord(
            at=r.at,
            kind="repair",
            record=f"repair:{r.pk}",
            workspace=p.workspace_id,
            actor=_who(r.actor, r.actor_label),
            action="manual_repair",
            subject=r.action_key,
            before="",
            after=r.resulting_state,
            reason=f"{r.what_was_done} (evidence: {r.evidence or 'none'})",
        )


def _incident_events(p: Period) -> Iterable[AuditRecord]:
    """Acknowledged, resolved, paged...: of this workspace's incidents (an incident is of one workspace)."""
    rows = IncidentEvent.objects.filter(
        incident__workspace_id=p.workspace_id, at__gte=p.start, at__lt=p.end
    ).select_related("incident", "actor")
    for e in rows:
        yield AuditRecord(
            at=e.at,
            kind="incident_event",
            record=f"incident_event:{e.pk}",
            workspace=p.workspace_id,
            actor=_who(e.actor, e.actor_label),
            action=e.action,
            subject=f"incident {e.incident_id} ({e.incident.kind})",
            before=e.from_state,
            after=e.to_state,
            reason=e.note,
        )


def _destination_events(p: Period) -> Iterable[AuditRecord]:
    rows = DestinationEvent.objects.filter(at__gte=p.start, at__lt=p.end).select_related("actor")
    for e in rows:
        yield AuditRecord(
            at=e.at,
            kind="destination_event",
            record=f"destination_event:{e.pk}",
            workspace=None,
            actor=_who(e.actor, e.actor_label or "dispatcher"),
            action=e.action or "transition",
            subject=f"destination {e.destination}",
            before=e.from_state,
            after=e.to_state,
            reason=e.reason,
        )


def _mode(mode: str, allowed: list, workspace_id: int) -> str:
    if not mode:
        return ""
    return f"{mode} (this workspace {'allowed' if workspace_id in allowed else 'not listed'})"


def _mode_changes(p: Period) -> Iterable[AuditRecord]:
    rows = WorkflowModeChange.objects.filter(
        changed_at__gte=p.start, changed_at__lt=p.end
    ).select_related("changed_by")
    for c in rows:
        yield AuditRecord(
            at=c.changed_at,
            kind="workflow_mode_change",
            record=f"workflow_mode_change:{c.pk}",
            workspace=None,
            actor=_who(c.changed_by),
            action="set_mode",
            subject=f"workflow {c.workflow}",
            before=_mode(c.from_mode, c.from_allowed, p.workspace_id),
            after=_mode(c.to_mode, c.to_allowed, p.workspace_id),
            reason=c.reason,
        )


def _observed_outcomes(p: Period) -> Iterable[AuditRecord]:
    """What the current process did with an observed case, as recorded, and the owner's explanations."""
    in_period = Q(recorded_at__gte=p.start, recorded_at__lt=p.end) | Q(
        explained_at__gte=p.start, explained_at__lt=p.end
    )
    rows = ObservedOutcome.objects.filter(in_period, workspace_id=p.workspace_id).select_related(
        "recorded_by", "explained_by"
    )
    for o in rows:
        subject = f"{o.action_key} (rules {o.rule_version})"
        if p.start <= o.recorded_at < p.end:
            yield AuditRecord(
                at=o.recorded_at,
                kind="observed_outcome",
                record=f"observed_outcome:{o.pk}",
                workspace=p.workspace_id,
                actor=_who(o.recorded_by),
                action=f"record_outcome_{o.source}",
                subject=subject,
                before="",
                after="agrees" if o.agrees else f"disagrees: {o.difference}",
                reason=o.outcome,
            )
        if o.explained_at is not None and p.start <= o.explained_at < p.end:
            yield AuditRecord(
                at=o.explained_at,
                kind="observed_outcome",
                record=f"observed_outcome:{o.pk}:explained",
                workspace=p.workspace_id,
                actor=_who(o.explained_by),
                action="explain_disagreement",
                subject=subject,
                before="not explained",
                after="explained",
                reason=o.explanation,
            )


def _exports(p: Period) -> Iterable[AuditRecord]:
    rows = AuditExport.objects.filter(
        workspace_id=p.workspace_id, exported_at__gte=p.start, exported_at__lt=p.end
    ).select_related("exported_by")
    for x in rows:
        yield AuditRecord(
            at=x.exported_at,
            kind="audit_export",
            record=f"audit_export:{x.pk}",
            workspace=p.workspace_id,
            actor=_who(x.exported_by),
            action=f"export_{x.format}",
            subject=f"audit trail {x.period_start.isoformat()} to {x.period_end.isoformat()}",
            before="",
            after=f"{x.event_count} events",
            reason=f"through the {x.channel}",
        )


def _erasures(p: Period) -> Iterable[AuditRecord]:
    """Each erasure on request: who, when, why and how many rows of each kind; never the erased data."""
    rows = Erasure.objects.filter(
        workspace_id=p.workspace_id, erased_at__gte=p.start, erased_at__lt=p.end
    ).select_related("erased_by")
    for x in rows:
        yield AuditRecord(
            at=x.erased_at,
            kind="erasure",
            record=f"erasure:{x.pk}",
            workspace=p.workspace_id,
            actor=_who(x.erased_by),
            action="erase_personal_data",
            subject="one data subject's personal fields",
            before="",
            after=x.counts_words,
            reason=x.reason,
        )


@dataclass(frozen=True)
class Source:
    permission: str  # what lets staff view these rows in admin
    read: Callable[[Period], Iterable[AuditRecord]]


SOURCES: dict[str, Source] = {
    "request_event": Source("approvals.view_requestevent", _request_events),
    "decision": Source("approvals.view_approval", _decisions),
    "role_change": Source("approvals.view_rolechange", _role_changes),
    "handoff_event": Source("outbox.view_handoffevent", _handoff_events),
    "finding_event": Source("reconciliation.view_findingevent", _finding_events),
    "repair": Source("reconciliation.view_manualrepair", _repairs),
    "incident_event": Source("incidents.view_incidentevent", _incident_events),
    "destination_event": Source("outbox.view_destinationevent", _destination_events),
    "workflow_mode_change": Source("approvals.view_workflowmodechange", _mode_changes),
    "observed_outcome": Source("approvals.view_observedoutcome", _observed_outcomes),
    "audit_export": Source("approvals.view_auditexport", _exports),
    "erasure": Source("outbox.view_erasure", _erasures),
}
