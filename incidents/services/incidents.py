"""Keeping incidents in step with their causes: open one per cause, add members, settle members, resolve
by itself, and page once the delay of its severity has passed (`incidents_sync`, run by the alert sweep).

An incident whose cause is a condition (a destination paused, a backlog) resolves when the condition ends,
whatever its members. Any other resolves by itself when its cause is not seen any more and every member is
settled: a handoff delivered, cancelled or superseded; a finding resolved; a rejected trigger replaced by a
later accepted one; a security event past the rate window. A resolved incident never reopens: the same
cause seen later is a new incident, which pages again. An acknowledgement that lapses while the cause holds
opens the incident again, and it pages again. A resolved incident keeps its cause, its first and latest
evidence and its timeline.
"""

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, F, OuterRef, Q

from approvals.on_call import active_operators, failure_owner_id
from incidents.causes import (
    Cause,
    backlog_causes,
    causes_now,
    held_by_its_owner,
    paused_destinations,
    security_window_start,
    unanswered_rejections,
)
from incidents.channels.delivery import KEY_PREFIX
from incidents.models import (
    CONDITION_KINDS,
    Incident,
    IncidentEvent,
    IncidentKind,
    IncidentMember,
    IncidentSeverity,
    IncidentState,
    Notification,
    NotificationEvent,
)
from incidents.services.notifications import incident_notify, incident_queue_notice
from lib.databases import DB
from outbox.clock import DbNow, db_time
from outbox.models import OPEN_STATES, CaseHold, Handoff
from outbox.redaction import redact_text
from reconciliation.models import Finding, SecurityEvent

SYSTEM = "incident sweep"
DETAIL_FIELDS = ("destination", "failure_class", "reason_code", "workflow", "step", "rule_version")


@dataclass
class SyncResult:
    opened: int = 0
    members_added: int = 0
    paged: int = 0
    resolved: int = 0
    escalated_to_page: list[int] = field(default_factory=list)


def incident_event(
    incident: Incident, action: str, *, actor=None, note: str = "", **states
) -> None:
    IncidentEvent.objects.using(DB).create(
        incident=incident,
        action=action,
        actor=actor,
        actor_label=actor.get_username() if actor is not None else SYSTEM,
        note=note[:2000],
        from_state=states.get("from_state", ""),
        to_state=states.get("to_state", ""),
    )


def _live_of(cause: Cause):
    return (
        Incident.objects.using(DB).live().filter(cause=cause.cause, workspace_id=cause.workspace_id)
    )


def notify_delay(severity: str) -> float:
    """Seconds before anyone is told of an incident of this severity (ALERT_NOTIFY_DELAY_SECONDS)."""
    return float(settings.ALERT_NOTIFY_DELAY_SECONDS.get(severity, 0))


def _open(cause: Cause) -> tuple[Incident, bool]:
    """The live incident of this cause in its workspace, opened now if there is none (a concurrent
    sweep may win)."""
    live = _live_of(cause).first()
    if live is not None:
        return live, False
    fields = {name: cause.details.get(name, "") for name in DETAIL_FIELDS}
    queue = cause.severity == IncidentSeverity.QUEUE
    evidence = redact_text(str(cause.details.get("evidence", "")))[:2000]
    try:
        with transaction.atomic(using=DB):
            incident = Incident.objects.using(DB).create(
                cause=cause.cause,
                workspace_id=cause.workspace_id,
                kind=cause.kind,
                severity=cause.severity,
                title=cause.title[:300],
                high_impact=bool(cause.details.get("high_impact")),
                owner_id=failure_owner_id(cause.workspace_id, workflow=fields["workflow"]),
                sla_due_at=DbNow(3600.0 * settings.ALERT_INCIDENT_SLA_HOURS) if queue else None,
                notify_after=DbNow(notify_delay(cause.severity)),
                cause_since=cause.details.get("since"),
                evidence_first=evidence,
                evidence_last=evidence,
                **{name: str(value)[:60] for name, value in fields.items()},
            )
            incident_event(incident, "opened", to_state=IncidentState.OPEN, note=cause.title)
    except IntegrityError:
        return _live_of(cause).get(), False
    return incident, True


def _add_members(incident: Incident, cause: Cause) -> int:
    before = IncidentMember.objects.using(DB).filter(incident=incident).count()
    IncidentMember.objects.using(DB).bulk_create(
        [
            IncidentMember(
                incident=incident,
                member_key=m.key,
                handoff_id=m.handoff_id,
                finding_id=m.finding_id,
                trigger_id=m.trigger_id,
                security_event_id=m.security_event_id,
                workspace_id=m.workspace_id,
                action_key=m.action_key[:200],
            )
            for m in cause.members
        ],
        ignore_conflicts=True,
        batch_size=500,
    )
    return IncidentMember.objects.using(DB).filter(incident=incident).count() - before


def _raise_to_page(incident: Incident, cause: Cause) -> None:
    """A queue incident whose cause now pages (many at once, a corruption threshold crossed) pages."""
    if incident.severity == IncidentSeverity.QUEUE and cause.severity == IncidentSeverity.PAGE:
        Incident.objects.using(DB).filter(pk=incident.pk).update(
            severity=IncidentSeverity.PAGE,
            title=cause.title[:300],
            sla_due_at=None,
            notify_after=DbNow(notify_delay(IncidentSeverity.PAGE)),
        )
        incident_event(incident, "raised_to_page", note=cause.title)
        incident.severity = IncidentSeverity.PAGE


def member_settled() -> Q:
    """A member whose row is no longer a problem: a handoff no longer open, a finding no longer live, a
    rejected trigger replaced, a security event past the window (database clock)."""
    open_handoffs = Handoff.objects.using(DB).filter(state__in=OPEN_STATES).values("pk")
    live_findings = Finding.objects.using(DB).live().values("pk")
    rejected = unanswered_rejections().values("pk")
    recent = SecurityEvent.objects.using(DB).filter(at__gte=security_window_start()).values("pk")
    settled = Q(finding_id__isnull=True, handoff_id__isnull=False) & ~Q(
        handoff_id__in=open_handoffs
    )
    settled |= Q(finding_id__isnull=False) & ~Q(finding_id__in=live_findings)
    settled |= Q(trigger_id__isnull=False) & ~Q(trigger_id__in=rejected)
    settled |= Q(security_event_id__isnull=False) & ~Q(security_event_id__in=recent)
    return settled


def settle_members() -> int:
    """Mark settled every unsettled member whose row is no longer a problem. One statement."""
    unsettled = IncidentMember.objects.using(DB).filter(
        settled_at__isnull=True,
        incident__state__in=(IncidentState.OPEN, IncidentState.ACKNOWLEDGED),
    )
    return unsettled.filter(member_settled()).update(settled_at=DbNow())


def _refresh_counts() -> None:
    counts = (
        IncidentMember.objects.using(DB)
        .filter(incident__state__in=(IncidentState.OPEN, IncidentState.ACKNOWLEDGED))
        .order_by()
        .values_list("incident_id")
        .annotate(n=Count("id"), settled=Count("id", filter=Q(settled_at__isnull=False)))
    )
    for pk, n, settled in counts:
        Incident.objects.using(DB).filter(pk=pk).update(member_count=n, settled_count=settled)


def incident_resolve(incident: Incident, *, actor=None, note: str = "") -> bool:
    """Resolve the incident; True when this call resolved it (a person or the sweep)."""
    with transaction.atomic(using=DB):
        moved = (
            Incident.objects.using(DB)
            .filter(pk=incident.pk, state__in=(IncidentState.OPEN, IncidentState.ACKNOWLEDGED))
            .update(
                state=IncidentState.RESOLVED,
                resolved_at=DbNow(),
                resolved_by=actor,
                next_escalation_at=None,
            )
        )
        if moved:
            incident_event(
                incident,
                "resolved" if actor is not None else "auto_resolved",
                actor=actor,
                note=note or "every member settled and the cause is gone",
                from_state=incident.state,
                to_state=IncidentState.RESOLVED,
            )
    if moved:
        incident_notify(incident, NotificationEvent.RESOLVE)
    return bool(moved)


def _resolve_settled(seen: set[tuple[str, int | None]]) -> int:
    """Resolve every live incident whose cause is not seen now: a condition at once (the pause or the
    backlog is over), any other once every member is settled."""
    has_unsettled = IncidentMember.objects.using(DB).filter(
        incident=OuterRef("pk"), settled_at__isnull=True
    )
    candidates = (
        Incident.objects.using(DB)
        .live()
        .filter(Q(kind__in=CONDITION_KINDS) | ~Exists(has_unsettled))
        .order_by("pk")
    )
    return sum(
        incident_resolve(
            incident,
            note="the condition ended" if incident.resolves_with_its_condition else "",
        )
        for incident in candidates
        if (incident.cause, incident.workspace_id) not in seen
    )


def _reopen(incident: Incident, action: str, note: str) -> int:
    """Open an acknowledged incident again, paging from the first level (a queue incident is told
    again); 1 when it moved."""
    with transaction.atomic(using=DB):
        moved = (
            Incident.objects.using(DB)
            .filter(pk=incident.pk, state=IncidentState.ACKNOWLEDGED)
            .update(
                state=IncidentState.OPEN,
                pages_sent=0,
                ack_lapses_at=None,
                notify_after=DbNow(),
                next_escalation_at=None,
            )
        )
        if moved:
            incident_event(
                incident,
                action,
                note=note,
                from_state=IncidentState.ACKNOWLEDGED,
                to_state=IncidentState.OPEN,
            )
    if moved and incident.severity == IncidentSeverity.QUEUE:
        incident_queue_notice(incident, again=True)
    return moved


def _lapse_acknowledgements(seen: set[tuple[str, int | None]]) -> int:
    """Open again every acknowledged incident whose acknowledgement lapsed while its cause holds: it pages
    again from the first level (database clock)."""
    lapsed = (
        Incident.objects.using(DB)
        .filter(state=IncidentState.ACKNOWLEDGED, ack_lapses_at__lte=DbNow())
        .order_by("pk")
    )
    note = "acknowledged, but the cause still holds: paging again"
    return sum(
        _reopen(incident, "acknowledgement_lapsed", note)
        for incident in lapsed
        if (incident.cause, incident.workspace_id) in seen
    )


def _acknowledged_by_who_left(seen: set[tuple[str, int | None]]) -> int:
    """An acknowledgement by someone who can no longer act (deactivated; of a workspace's incident, no
    active operator of it and not its owner) is no acknowledgement: the incident is open again and pages
    as due while its cause holds."""
    operator = active_operators(OuterRef("workspace_id")).filter(
        user_id=OuterRef("acknowledged_by_id")
    )
    left = (
        Incident.objects.using(DB)
        .filter(state=IncidentState.ACKNOWLEDGED, acknowledged_by__isnull=False)
        .filter(
            Q(acknowledged_by__is_active=False)
            | (
                Q(workspace_id__isnull=False)
                & ~Exists(operator)
                & ~Q(owner_id=F("acknowledged_by_id"))
            )
        )
        .select_related("acknowledged_by")
        .order_by("pk")
    )
    return sum(
        _reopen(
            incident,
            "acknowledgement_void",
            f"acknowledged by {incident.acknowledged_by.username}, who can no longer act: paging again",
        )
        for incident in left
        if (incident.cause, incident.workspace_id) in seen
    )


def _without_handled(causes: list[Cause]) -> list[Cause]:
    """Drop members a person already resolved an incident about: resolving says "handled", so the same
    rows do not open the next incident (a handoff that fails again later is a new member key)."""
    keys = {m.key for cause in causes for m in cause.members}
    handled = set(
        IncidentMember.objects.using(DB)
        .filter(incident__resolved_by__isnull=False, member_key__in=keys)
        .values_list("member_key", flat=True)
    )
    kept = []
    for cause in causes:
        cause.members = [m for m in cause.members if m.key not in handled]
        if cause.members:
            kept.append(cause)
    return kept


def _page_new(result: SyncResult) -> None:
    """Page every open paging incident not paged yet whose delay has passed; tell the queue channels about
    queue incidents whose delay has passed. An incident resolved within its delay told nobody."""
    unpaged = Incident.objects.using(DB).filter(
        Q(notify_after__isnull=True) | Q(notify_after__lte=DbNow()),
        state=IncidentState.OPEN,
        pages_sent=0,
    )
    for incident in unpaged.order_by("pk"):
        if incident.severity == IncidentSeverity.QUEUE:
            incident_queue_notice(incident)
        elif incident_notify(incident, NotificationEvent.TRIGGER):
            result.paged += 1


def incident_cause_holds(incident_id: int) -> bool:
    """Whether the incident is open and its cause holds now, read from the database at the moment a page
    would go out: a destination still paused for the same reason, a backlog still there, a member still a
    problem. False: the page is withdrawn, never sent for a cause that has ended."""
    incident = Incident.objects.using(DB).filter(pk=incident_id, state=IncidentState.OPEN).first()
    if incident is None:
        return False
    if incident.kind == IncidentKind.DESTINATION:
        why = "" if incident.failure_class == "paused" else incident.failure_class
        return any(
            h.name == incident.destination and h.breaker_pause_reason == why
            for h in paused_destinations()
        )
    if incident.kind == IncidentKind.BACKLOG:
        return any(
            c.details["destination"] == incident.destination for c in backlog_causes(now=db_time())
        )
    members = IncidentMember.objects.using(DB).filter(incident=incident, settled_at__isnull=True)
    # A member its owner holds is being acted on: no page (an escalation too) goes out about it meanwhile.
    held = Handoff.objects.using(DB).filter(held_by_its_owner()).values("pk")
    return members.exclude(member_settled()).exclude(handoff_id__in=held).exists()


def _seen_again(incident: Incident, cause: Cause) -> None:
    """The cause seen this pass: when, and its latest evidence (the first is kept from the opening)."""
    changes = {"last_seen_at": DbNow()}
    evidence = redact_text(str(cause.details.get("evidence", "")))[:2000]
    if evidence:
        changes["evidence_last"] = evidence
    Incident.objects.using(DB).filter(pk=incident.pk).update(**changes)


def incidents_sync() -> SyncResult:
    """One pass: every cause seen now becomes (or joins) its live incident; settled incidents resolve;
    new pages go out (as notifications, sent by `notifications_send_due`)."""
    result = SyncResult()
    # "Now" of the stored times it is compared with (attention since, SLA due, triggers received): the database's.
    causes = _without_handled(causes_now(now=db_time()))
    for cause in causes:
        incident, opened = _open(cause)
        result.opened += opened
        result.members_added += _add_members(incident, cause)
        _raise_to_page(incident, cause)
        _seen_again(incident, cause)
    settle_members()
    _refresh_counts()
    seen = {(cause.cause, cause.workspace_id) for cause in causes}
    result.resolved = _resolve_settled(seen)
    _lapse_acknowledgements(seen)
    _acknowledged_by_who_left(seen)
    _page_new(result)
    return result


def notification_send_check(action_key: str) -> str:
    """Why a notification's handoff must not go now (the dispatcher asks just before the call): a page or
    queue notice whose incident is over or whose cause has ended is withdrawn, on the incident's timeline;
    acknowledgements and resolves always go. "" : send it."""
    _workspace, incident_id, number, channel_id = action_key.removeprefix(KEY_PREFIX).split(":")
    notification = (
        Notification.objects.using(DB)
        .select_related("channel")
        .filter(incident_id=int(incident_id), number=int(number), channel_id=int(channel_id))
        .first()
    )
    if notification is None or notification.event != NotificationEvent.TRIGGER:
        return ""
    if incident_cause_holds(notification.incident_id):
        return ""
    why = _held_by_owner(notification.incident_id) or "the cause had ended"
    IncidentEvent.objects.using(DB).create(
        incident_id=notification.incident_id,
        action="page_withdrawn",
        actor_label="notification sender",
        note=f"{notification.message_id} to {notification.channel.name}: {why}, nothing was sent",
    )
    return why


def _held_by_owner(incident_id: int) -> str:
    """Why a page is withdrawn when its open members are held by their owners (`held_by_its_owner`): who
    holds them and until when they are quiet (the hold's end, or `ALERT_HOLD_QUIET_HOURS` from its start,
    whichever is first). "": no member so held, the cause has ended."""
    members = IncidentMember.objects.using(DB).filter(
        incident_id=incident_id, settled_at__isnull=True
    )
    holds = CaseHold.objects.using(DB).filter(
        pk__in=Handoff.objects.using(DB)
        .filter(held_by_its_owner(), pk__in=members.values("handoff_id"))
        .values("case_hold_id")
    )
    quiet = timedelta(hours=settings.ALERT_HOLD_QUIET_HOURS)
    owners = sorted(
        {
            f"{hold.set_by} until "
            f"{min(filter(None, (hold.ends_at, hold.created_at + quiet))):%Y-%m-%d %H:%M} UTC"
            for hold in holds
        }
    )
    return f"the failure is held by its owner ({', '.join(owners)})" if owners else ""
