"""What every notification and the incident page say about an incident: what happened in words, the
workflow, an instance, the workflow's last delivered step, the failure class, the affected record and the
safest next action, with the link to the incident. Only the members of the recipient's workspace are
described (an every-workspace channel is the on-call team's); everything goes through redaction."""

from dataclasses import dataclass

from django.db.models import F
from django.urls import reverse

from lib.databases import DB
from outbox.models import Handoff
from outbox.redaction import redact_text
from reconciliation import next_actions
from reconciliation.alerts.items import absolute, last_delivered_step
from reconciliation.models import Finding, Incident, IncidentKind, IncidentMember

TRIGGER_NEXT_ACTION = (
    "Read the reasons on the trigger's page, correct the request at the sender and send it again "
    "(a new event id); nothing was recorded for the rejected one."
)
SECURITY_NEXT_ACTION = (
    "Find who is calling with a wrong or old signature (or guessing passwords): check the senders' "
    "secrets and rotate any that may have leaked; nothing was accepted."
)


@dataclass(frozen=True)
class IncidentSummary:
    incident_id: int
    title: str
    state: str
    severity: str
    members: int
    settled: int
    workflow: str
    instance: str
    last_delivered_step: str
    failure_class: str
    affected_record: str
    next_action: str
    link: str

    def lines(self) -> list[str]:
        return [
            self.title,
            "",
            f"State:                {self.state} ({self.settled} of {self.members} settled)",
            f"Workflow:             {self.workflow}",
            f"Instance:             {self.instance}",
            f"Last delivered step:  {self.last_delivered_step}",
            f"Failure class:        {self.failure_class}",
            f"Affected record:      {self.affected_record}",
            f"Safest next action:   {self.next_action}",
            f"Open:                 {self.link}",
        ]


def _first_member(incident: Incident, workspace_id: int | None) -> IncidentMember | None:
    members = IncidentMember.objects.using(DB).filter(incident=incident)
    if workspace_id is not None:
        members = members.filter(workspace_id=workspace_id)
    # An unsettled member is the example, if there is one (NULL first on every backend).
    return members.order_by(F("settled_at").asc(nulls_first=True), "pk").first()


def _others(n: int) -> str:
    return f" and {n - 1} more" if n > 1 else ""


@dataclass(frozen=True)
class Facts:
    """What the first member of an incident says: the example every notification names."""

    workflow: str
    last_delivered_step: str
    failure_class: str
    affected_record: str
    next_action: str


def _handoff_facts(handoff: Handoff) -> Facts:
    failure = handoff.failure_class or "none"
    if handoff.reason_code:
        failure = f"{failure} ({handoff.reason_code})"
    return Facts(
        handoff.workflow,
        last_delivered_step(handoff),
        failure,
        f"{handoff.source_ref}, workspace {handoff.workspace_id}",
        next_actions.for_handoff(handoff),
    )


def _finding_facts(finding: Finding, handoff: Handoff | None) -> Facts:
    step = last_delivered_step(handoff) if handoff else "none: no outbox row for this key"
    return Facts(
        finding.workflow or "unknown",
        step,
        f"reconciliation: {finding.kind}",
        finding.action_key,
        finding.next_action,
    )


def _facts(incident: Incident, member: IncidentMember | None) -> Facts:
    handoff_id = member.handoff_id if member else None
    finding_id = member.finding_id if member else None
    handoff = Handoff.objects.using(DB).filter(pk=handoff_id).first() if handoff_id else None
    finding = Finding.objects.using(DB).filter(pk=finding_id).first() if finding_id else None
    if finding is not None:
        return _finding_facts(finding, handoff)
    if handoff is not None:
        return _handoff_facts(handoff)
    if incident.kind == IncidentKind.REJECTED_TRIGGERS:
        record = f"trigger {member.trigger_id}, reference {member.action_key}" if member else ""
        return Facts(
            incident.workflow or "unknown",
            "none: rejected before a request was recorded",
            "rejected_at_intake",
            record,
            TRIGGER_NEXT_ACTION,
        )
    return Facts(
        "none",
        "not applicable",
        incident.failure_class,
        "none (nothing was accepted)",
        SECURITY_NEXT_ACTION,
    )


def incident_link(incident: Incident) -> str:
    return absolute(reverse("incidents:detail", args=[incident.pk]))


def incident_summary(incident: Incident, *, workspace_id: int | None = None) -> IncidentSummary:
    member = _first_member(incident, workspace_id)
    scoped = IncidentMember.objects.using(DB).filter(incident=incident)
    if workspace_id is not None:
        scoped = scoped.filter(workspace_id=workspace_id)
    total = scoped.count()
    settled = scoped.filter(settled_at__isnull=False).count()
    facts = _facts(incident, member)
    return IncidentSummary(
        incident_id=incident.pk,
        title=redact_text(incident.title),
        state=incident.get_state_display(),
        severity=incident.severity,
        members=total,
        settled=settled,
        workflow=facts.workflow,
        instance=(member.action_key if member else "none") + _others(total),
        last_delivered_step=facts.last_delivered_step,
        failure_class=facts.failure_class,
        affected_record=redact_text(facts.affected_record) + _others(total),
        next_action=facts.next_action,
        link=incident_link(incident),
    )
