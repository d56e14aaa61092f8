"""What every notification and the incident page say about an incident: what happened in words, the
workflow, an instance, the workflow's last delivered step, the failure class, the affected record and the
safest next action, with the link to the incident. Only the members of the recipient's workspace are
described (an every-workspace channel is the on-call team's); everything goes through redaction."""

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F
from django.urls import reverse

from incidents.causes import condition_words
from incidents.models import EscalationPolicy, Incident, IncidentKind, IncidentMember
from lib.databases import DB
from outbox.models import Handoff, HandoffKind, HandoffState, PauseReason
from outbox.redaction import redact_text
from reconciliation import next_actions
from reconciliation.models import Finding

TRIGGER_NEXT_ACTION = (
    "Read the reasons on the trigger's page, correct the request at the sender and send it again "
    "(a new event id); nothing was recorded for the rejected one."
)
SECURITY_NEXT_ACTION = (
    "Find who is calling with a wrong or old signature (or guessing passwords): check the senders' "
    "secrets and rotate any that may have leaked; nothing was accepted."
)


def absolute(path: str) -> str:
    return f"{settings.CONSOLE_BASE_URL}{path}"


def last_delivered_step(handoff: Handoff) -> str:
    """The workflow instance's last step delivered with a validated receipt (`provision_account` when step 3
    fails), not the failing handoff's own progress; "none yet" when no step was delivered."""
    delivered = (
        Handoff.objects.using(DB)
        .filter(
            instance_key=handoff.instance_key,
            kind=HandoffKind.ACTION,
            state=HandoffState.DELIVERED,
        )
        .order_by("-step_index")
        .first()
    )
    if delivered is None:
        return "none yet: no step of this instance has been delivered"
    name = delivered.step or delivered.workflow
    return (
        f"{name} (delivered {delivered.delivered_at:%Y-%m-%d %H:%M} UTC, "
        f"task {delivered.destination_id})"
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
    owner: str = "nobody"
    sla: str = ""
    since: str = ""
    first_evidence: str = ""
    last_evidence: str = ""

    @property
    def headline(self) -> str:
        """What it is, who owns it and by when: "PAGE" only for an incident that pages."""
        kind = "PAGE" if self.severity == "page" else "QUEUE"
        return f"{kind}: incident {self.incident_id}: {self.title} (owner {self.owner}; {self.sla})"

    def lines(self) -> list[str]:
        evidence = [
            f"Cause since:          {self.since}",
            f"First evidence:       {self.first_evidence}",
            f"Latest evidence:      {self.last_evidence}",
        ]
        return [
            self.title,
            "",
            f"Severity:             {_severity_words(self.severity)}, {self.sla}",
            f"Owner:                {self.owner}",
            f"State:                {self.state} ({self.settled} of {self.members} settled)",
            *(evidence if self.first_evidence else []),
            f"Workflow:             {self.workflow}",
            f"Instance:             {self.instance}",
            f"Last delivered step:  {self.last_delivered_step}",
            f"Failure class:        {self.failure_class}",
            f"Affected record:      {self.affected_record}",
            f"Safest next action:   {self.next_action}",
            f"Open:                 {self.link}",
        ]


def _severity_words(severity: str) -> str:
    return "page (wakes someone up)" if severity == "page" else "queue (nobody is woken up)"


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


def _condition_facts(incident: Incident) -> Facts:
    """A pause or a backlog is the destination's, not one handoff's: said from the incident's evidence."""
    if incident.kind == IncidentKind.BACKLOG:
        action = (
            f"check that the dispatchers serving {incident.destination} run and that its limits are not "
            "set too low; the handoffs go once they are served"
        )
    elif incident.failure_class == "credential":
        action = (
            f"check the credentials of destination {incident.destination} (its page says where each "
            "secret comes from) and restore or rotate them; a probe resumes it"
        )
    elif incident.failure_class == PauseReason.TOKEN_ENDPOINT:
        action = (
            f"check the OAuth2 token endpoint of destination {incident.destination} (its page names it): "
            "the API was not called and may well be up; probes resume it by themselves once a token is given"
        )
    else:
        action = (
            f"check that destination {incident.destination} is up and reachable; probes resume it by "
            "themselves once a call succeeds"
        )
    return Facts(
        f"every workflow sending to {incident.destination}",
        "not applicable: the destination's own problem",
        condition_words(incident.failure_class),
        f"handoffs waiting for {incident.destination}",
        action,
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


def _owner_name(incident: Incident) -> str:
    if incident.owner_id is None:
        return "nobody"
    user = get_user_model().objects.using(DB).filter(pk=incident.owner_id).first()
    return user.get_username() if user is not None else "nobody"


def sla_words(incident: Incident) -> str:
    """A page: how long before it escalates; a queue: its SLA's due time."""
    if incident.severity == "page":
        timeout, _most = EscalationPolicy.objects.using(DB).for_workspaces(incident.workspace_ids)
        within = f"{timeout} s" if timeout < 120 else f"{timeout // 60} min"
        return f"acknowledge within {within}"
    if incident.sla_due_at is None:
        return "no SLA"
    return f"SLA {incident.sla_due_at:%Y-%m-%d %H:%M} UTC"


def incident_summary(incident: Incident, *, workspace_id: int | None = None) -> IncidentSummary:
    member = _first_member(incident, workspace_id)
    scoped = IncidentMember.objects.using(DB).filter(incident=incident)
    if workspace_id is not None:
        scoped = scoped.filter(workspace_id=workspace_id)
    total = scoped.count()
    settled = scoped.filter(settled_at__isnull=False).count()
    facts = (
        _condition_facts(incident)
        if incident.resolves_with_its_condition
        else _facts(incident, member)
    )
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
        owner=_owner_name(incident),
        sla=sla_words(incident),
        since=f"{incident.cause_since:%Y-%m-%d %H:%M:%S} UTC" if incident.cause_since else "",
        first_evidence=incident.evidence_first,
        last_evidence=incident.evidence_last,
    )
