"""What groups failures into one incident: each source's causes seen now, with their members. Writes nothing.

A cause is a string that names what the members have in common, so that the same cause seen again (by
this pass or the next) finds the same live incident:
- a destination paused by its breaker, or held by a dispatcher that cannot serve it (`why`: unservable):
  `destination:<name>:<why>`; members: the handoffs the pause holds (waiting, or refused for the pause's
  reason), never those that need a person for another reason; it lasts as long as the pause;
- a destination whose queue (what a dispatcher would claim: not a held case, nor a step behind its
  ordering key) grows older or deeper while nothing fails: `backlog:<name>` (older counted from the end of
  an operator's pause or window, or a Retry-After wait, if later than the due time); it lasts as long as the
  backlog;
- handoffs that need a person for the same reason: `failures:<destination>:<class>:<reason>:<rule version>:
  <workflow>:<step>`; a step marked high-impact in its rule version pages on its first failure;
- live reconciliation findings of one kind: `findings:<kind>`; corruption (payload mismatch, missing at the
  receiver) pages above a threshold;
- security events of one kind above a rate: `security:<kind>` (password spraying is already a rate: its
  first event pages);
- triggers rejected at intake for one workflow and workspace: `rejected_triggers:<workspace>:<workflow>`.

A channel's own notifications (`Handoff.objects.notifications()`, keys `incident:…`, to the
`alert-channel-<id>` destinations) are never a cause's members, and a channel's destination paused or falling
behind is no cause: a failing channel would otherwise open an incident about its own page and notify about the
notification. Health shows the failing channel instead (`incidents/selectors/channels.py`).

A cause seen in several workspaces is one cause per workspace (`Cause.workspace_id`): each becomes its own
incident, counted, owned and paged in its workspace (security events belong to none).
"""

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Exists, Min, OuterRef, Q

from approvals.models import RuleVersion, TriggerOutcome, TriggerRecord
from incidents.models import IncidentKind, IncidentSeverity
from lib.databases import DB
from outbox.breaker_rules import TOKEN_ENDPOINT_DOWN
from outbox.clock import DbNow
from outbox.destinations.registry import row_config, secret_sources
from outbox.models import (
    CaseHold,
    DestinationConfig,
    DestinationHealth,
    DestinationHold,
    FailureClass,
    Handoff,
    HandoffState,
    PauseReason,
)
from outbox.models.handoffs import CHANNEL_DESTINATION_PREFIX
from outbox.redaction import redact_text
from reconciliation.models import Finding, FindingKind, SecurityEvent, SecurityEventKind

PAGE, QUEUE = IncidentSeverity.PAGE, IncidentSeverity.QUEUE
CORRUPTION = (FindingKind.PAYLOAD_MISMATCH, FindingKind.MISSING_AT_RECEIVER)
# Members read per cause and pass: an incident of more is still one incident; the rest join next pass.
MEMBER_CAP = 5000
FAILURE_FIELDS = ("destination", "failure_class", "reason_code", "rule_version", "workflow", "step")


@dataclass(frozen=True)
class Member:
    key: str
    workspace_id: int | None
    action_key: str = ""
    handoff_id: int | None = None
    finding_id: int | None = None
    trigger_id: int | None = None
    security_event_id: int | None = None


@dataclass
class Cause:
    cause: str
    kind: str
    severity: str
    title: str
    members: list[Member] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    workspace_id: int | None = None


def _handoff_members(handoffs, *, by_episode: bool = False) -> list[Member]:
    return [
        Member(_handoff_key(pk, episode if by_episode else None), ws, key, handoff_id=pk)
        for pk, ws, key, episode in handoffs.order_by("pk").values_list(
            "pk", "workspace_id", "action_key", "attention_since"
        )[:MEMBER_CAP]
    ]


def _handoff_key(pk: int, episode: datetime | None) -> str:
    """A handoff's member key; with its failure episode, so that failing again later is a new member."""
    return f"handoff:{pk}" if episode is None else f"handoff:{pk}:{int(episode.timestamp())}"


PAUSE_WORDS = {
    PauseReason.CREDENTIAL: "credentials refused",
    PauseReason.UNREACHABLE: "unreachable",
    # The API may be up: its token endpoint is what to look at.
    PauseReason.TOKEN_ENDPOINT: TOKEN_ENDPOINT_DOWN,
}


def condition_words(failure_class: str) -> str:
    """A destination incident's failure class as a person reads it (its pause reason's words within a
    sentence, as Health says them: "token endpoint unavailable (the API was not called)"), never the code
    (`token_endpoint`) the cause and the incident's column carry."""
    if failure_class == "backlog":
        return "falling behind (handoffs due and waiting while no call fails)"
    if failure_class in PauseReason.values:
        label = str(PauseReason(failure_class).label)
        return label[:1].lower() + label[1:]
    return failure_class


def paused_destinations() -> list[DestinationHealth]:
    """Destinations paused by their breaker right now (a live hold of the breaker's; the health page and
    every affected handoff show them too), annotated with the hold (`with_breaker`)."""
    return list(DestinationHealth.objects.using(DB).paused_by_breaker().order_by("name"))


def credential_names(destination: str) -> str:
    """Where the destination's credentials come from ($VARIABLE, a file), as its page shows them."""
    row = DestinationConfig.objects.using(DB).filter(name=destination).first()
    sources = secret_sources(row_config(row)) if row is not None else []
    return ", ".join(source.where for source in sources) or "as its page shows"


def pause_evidence(health: DestinationHealth) -> str:
    """What the pause was: its reason in words, when, the answer that caused it and, for refused credentials,
    which credentials; kept on the incident after the pause ends."""
    since = (
        f"{health.breaker_since:%Y-%m-%d %H:%M:%S} UTC" if health.breaker_since else "unknown time"
    )
    why = health.breaker_pause_reason or "paused"
    words = condition_words(why)
    text = f"{words} since {since}: {redact_text(health.last_error)[:300] or 'no answer recorded'}"
    if why == PauseReason.CREDENTIAL:
        text += f" (credentials: {credential_names(health.name)})"
    return text


def _pause_members(health: DestinationHealth, why: str) -> list[Member]:
    """The handoffs the pause holds: waiting ones, and those refused for the pause's own reason. Keys carry
    the pause's start, so that a later pause of the same destination is a new incident's members."""
    held = Handoff.objects.using(DB).business().open().filter(destination=health.name)
    held = held.exclude(Q(state=HandoffState.NEEDS_ATTENTION) & ~Q(failure_class=why))
    episode = int(health.breaker_since.timestamp()) if health.breaker_since else 0
    return [
        Member(f"handoff:{pk}:p{episode}", ws, key, handoff_id=pk)
        for pk, ws, key in held.order_by("pk").values_list("pk", "workspace_id", "action_key")[
            :MEMBER_CAP
        ]
    ]


def destination_causes() -> list[Cause]:
    causes = []
    for health in paused_destinations():
        if health.name.startswith(CHANNEL_DESTINATION_PREFIX):
            continue
        why = health.breaker_pause_reason or "paused"
        words = PAUSE_WORDS.get(why, why)
        title = f"Destination {health.name} paused: {words}"
        if why == PauseReason.UNSERVABLE:
            title = f"Destination {health.name} cannot be served: {health.last_error}"[:200]
        causes.append(
            Cause(
                f"destination:{health.name}:{why}",
                IncidentKind.DESTINATION,
                PAGE,
                title,
                _pause_members(health, why),
                {
                    "destination": health.name,
                    "failure_class": why,
                    "since": health.breaker_since,
                    "evidence": pause_evidence(health),
                },
            )
        )
    return causes


def _due_waiting():
    """The handoffs a dispatcher would claim now (`HandoffQuerySet.due`, the claim's own rule): not one an
    operator holds, nor one behind an earlier step of its ordering key, which wait for a person (the held
    case, or the earlier step's own incident), not for a dispatcher."""
    return Handoff.objects.using(DB).due()


def _backlog_depths() -> dict[str, tuple[int, datetime, int]]:
    """Per destination of the backlog rule (`HandoffQuerySet.backlog`, the outbox's, which `/metrics`' figure
    for HandoffPendingTooLong reads too: due handoffs, none of a destination an intended hold holds now, nor
    of an alert channel's) that its breaker does not pause (that backlog is the pause's own incident): (due
    handoffs waiting, the oldest one's due time, how many of them are past their SLA), on the database clock."""
    paused = DestinationHold.objects.of_breaker().values("destination")
    rows = (
        Handoff.objects.using(DB)
        .backlog()
        .exclude(destination__in=paused)
        .order_by()
        .values_list("destination")
        .annotate(
            n=Count("id"),
            oldest=Min("next_attempt_at"),
            late=Count("id", filter=Q(sla_due_at__lt=DbNow())),
        )
    )
    return {name: (n, oldest, late) for name, n, oldest, late in rows}


def _intended_hold_end(name: str, *, after: datetime, now: datetime) -> datetime | None:
    """The end, later than `after`, of the destination's last intended hold, by the backlog rule
    (`DestinationHold.objects.backlog_since`); None if none. Asked only for a destination whose oldest due
    handoff is already past the age limit or late, so a sweep with no backlog reads no hold."""
    [since] = DestinationHold.objects.using(DB).backlog_since([(name, after)], now=now)
    return since if since > after else None


def _late_after_hold(name: str, late: int, held_until: datetime | None) -> int:
    """Of a destination's `late` due handoffs, those whose SLA passed after its intended hold ended: while it
    catches up (less than the age limit since the hold's end), an SLA that passed under its operator's pause
    or window (or a Retry-After wait) is the hold's, known to whoever set it, not the destination falling
    behind; past the age limit the backlog pages by its age anyway."""
    if not late or held_until is None:
        return late
    return (
        _due_waiting()
        .filter(destination=name, sla_due_at__gt=held_until, sla_due_at__lt=DbNow())
        .count()
    )


def backlog_causes(*, now: datetime) -> list[Cause]:
    """Destinations whose due handoffs wait too long or pile up while nothing fails (no pause, no hold): a
    dispatcher that is down, a limit set too low. Lasts as long as the backlog. The age is counted from the
    later of the oldest due time and the end of the destination's last intended hold (`INTENDED_KINDS`): a
    destination catching up after its operator's pause or window is not falling behind until the catching
    up itself takes longer than the age limit, nor late for an SLA that passed while it was held."""
    causes = []
    age_limit = timedelta(seconds=settings.ALERT_BACKLOG_AGE_SECONDS)
    for name, (count, oldest, late) in sorted(_backlog_depths().items()):
        held_until = None
        if now - oldest >= age_limit or late:
            held_until = _intended_hold_end(name, after=oldest, now=now)
        since = held_until or oldest
        age = now - since
        late = _late_after_hold(name, late, held_until) if age < age_limit else late
        if age < age_limit and count < settings.ALERT_BACKLOG_DEPTH and not late:
            continue
        waiting = _due_waiting().filter(destination=name)
        evidence = (
            f"{count} handoff(s) due and waiting, the oldest due since {oldest:%Y-%m-%d %H:%M:%S} UTC"
            + (f", held until {held_until:%Y-%m-%d %H:%M:%S} UTC" if held_until else "")
            + f" ({int(age.total_seconds())} s), {late} past their SLA, while no call fails"
        )
        causes.append(
            Cause(
                f"backlog:{name}",
                IncidentKind.BACKLOG,
                PAGE,
                f"Destination {name} falling behind: {count} due handoff(s) waiting",
                _handoff_members(waiting),
                {
                    "destination": name,
                    "failure_class": "backlog",
                    "since": since,
                    "evidence": evidence,
                },
            )
        )
    return causes


def high_impact_steps() -> set[tuple[str, str]]:
    """(rule version, step) of every step its rule version marks high-impact (money movement...)."""
    marked = set()
    for version, steps in RuleVersion.objects.using(DB).values_list("version", "steps"):
        for step in steps or []:
            if isinstance(step, dict) and step.get("high_impact") is True:
                marked.add((version, step.get("name", "")))
    return marked


def _failure_severity(fields: dict, count: int, high_impact: bool) -> str:
    if high_impact or fields["failure_class"] == FailureClass.CREDENTIAL:
        return PAGE
    return PAGE if count >= settings.ALERT_WIDESPREAD_THRESHOLD else QUEUE


def _latest_failure(handoffs) -> dict:
    """The latest failure of a group, as evidence: when, which handoff, what the receiver answered."""
    latest = handoffs.order_by("-attention_since", "-pk").first()
    if latest is None or latest.attention_since is None:
        return {}
    error = redact_text(latest.last_error)[:300] or "no answer recorded"
    return {
        "since": latest.attention_since,
        "evidence": f"handoff {latest.pk} ({latest.action_key}) at "
        f"{latest.attention_since:%Y-%m-%d %H:%M:%S} UTC: {error}",
    }


def held_by_its_owner() -> Q:
    """A handoff an operator holds (a live case hold, `CaseHoldQuerySet.live`, the one rule) set less than
    `ALERT_HOLD_QUIET_HOURS` ago (database clock): the owner is acting on it, so its failure neither opens an
    incident nor keeps one paging. Past that, or once the hold ends, it is a failure again: a hold never
    hides one for ever. A hold whose own end has passed has ended for alerting at once, not when a
    dispatcher's sweep next marks it (`case_holds_expire`, which does not run while no dispatcher does)."""
    recent = (
        CaseHold.objects.live()
        .filter(
            pk=OuterRef("case_hold_id"),
            created_at__gt=DbNow(-3600.0 * settings.ALERT_HOLD_QUIET_HOURS),
        )
        .exclude(pk__in=CaseHold.objects.past_their_end().values("pk"))
    )
    return Q(case_hold__isnull=False) & Q(Exists(recent))


def failure_causes() -> list[Cause]:
    failing = (
        Handoff.objects.using(DB)
        .business()
        .filter(state=HandoffState.NEEDS_ATTENTION)
        .exclude(held_by_its_owner())
    )
    marked = high_impact_steps()
    causes = []
    by_workspace = failing.order_by().values(*FAILURE_FIELDS, "workspace_id")
    for group in by_workspace.annotate(n=Count("id")):
        count = group.pop("n")
        workspace_id = group.pop("workspace_id")
        high_impact = (group["rule_version"], group["step"]) in marked
        reason = group["reason_code"] or "no reason code"
        where = f"step {group['step']} of " if group["step"] else ""
        causes.append(
            Cause(
                "failures:" + ":".join(str(group[name]) for name in FAILURE_FIELDS),
                IncidentKind.FAILURES,
                _failure_severity(group, count, high_impact),
                f"{where}{group['workflow']} failing at {group['destination']}: "
                f"{group['failure_class'] or 'no class'} ({reason})",
                _handoff_members(
                    failing.filter(**group, workspace_id=workspace_id), by_episode=True
                ),
                {
                    **group,
                    "high_impact": high_impact,
                    **_latest_failure(failing.filter(**group, workspace_id=workspace_id)),
                },
                workspace_id,
            )
        )
    return causes


def finding_causes() -> list[Cause]:
    live = Finding.objects.using(DB).live()
    causes = []
    groups = live.order_by().values_list("kind", "workspace_id").annotate(n=Count("id"))
    for kind, workspace_id, count in groups:
        corrupt = kind in CORRUPTION and count >= settings.ALERT_CORRUPTION_THRESHOLD
        members = [
            Member(f"finding:{pk}", ws, key, handoff_id=handoff, finding_id=pk)
            for pk, ws, key, handoff in live.filter(kind=kind, workspace_id=workspace_id)
            .order_by("pk")
            .values_list("pk", "workspace_id", "action_key", "handoff_id")[:MEMBER_CAP]
        ]
        label = FindingKind(kind).label if kind in FindingKind.values else kind
        causes.append(
            Cause(
                f"findings:{kind}",
                IncidentKind.FINDINGS,
                PAGE if corrupt else QUEUE,
                f"Reconciliation: {count} finding(s) {label.lower()}",
                members,
                {"failure_class": f"reconciliation: {kind}"},
                workspace_id,
            )
        )
    return causes


def security_window_start() -> DbNow:
    """The start of the rate window, on the database clock that stamped the events."""
    return DbNow(-60.0 * settings.ALERT_SECURITY_WINDOW_MINUTES)


def _security_page_threshold(kind: str) -> int:
    """Events of `kind` in the window that page; a spraying event is itself a rate (names per window)."""
    if kind == SecurityEventKind.PASSWORD_SPRAYING:
        return 1
    return settings.ALERT_SECURITY_THRESHOLD


def security_causes() -> list[Cause]:
    recent = SecurityEvent.objects.using(DB).filter(at__gte=security_window_start())
    causes = []
    for kind, count in recent.order_by().values_list("kind").annotate(n=Count("id")):
        if count < _security_page_threshold(kind):
            continue
        members = [
            Member(f"security:{pk}", None, security_event_id=pk)
            for pk in recent.filter(kind=kind)
            .order_by("pk")
            .values_list("pk", flat=True)[:MEMBER_CAP]
        ]
        causes.append(
            Cause(
                f"security:{kind}",
                IncidentKind.SECURITY,
                PAGE,
                f"Security: {count} {kind.replace('_', ' ')} event(s) in "
                f"{settings.ALERT_SECURITY_WINDOW_MINUTES} minutes",
                members,
                {"failure_class": f"security: {kind}"},
            )
        )
    return causes


def unanswered_rejections():
    """Triggers rejected at intake that no later accepted trigger for the same reference replaced."""
    accepted_later = TriggerRecord.objects.using(DB).filter(
        outcome=TriggerOutcome.ACCEPTED,
        workspace_ref=OuterRef("workspace_ref"),
        workflow=OuterRef("workflow"),
        reference=OuterRef("reference"),
        received_at__gt=OuterRef("received_at"),
    )
    return (
        TriggerRecord.objects.using(DB)
        .filter(outcome=TriggerOutcome.REJECTED_AT_INTAKE, duplicate_of__isnull=True)
        .filter(~Exists(accepted_later))
    )


def rejected_trigger_causes(*, now: datetime) -> list[Cause]:
    since = now - timedelta(days=settings.ALERT_REJECTED_TRIGGER_DAYS)
    rejected = unanswered_rejections().filter(received_at__gte=since)
    causes = []
    for ws, workflow, count in (
        rejected.order_by().values_list("workspace_ref", "workflow").annotate(n=Count("id"))
    ):
        members = [
            Member(f"trigger:{pk}", ws, reference, trigger_id=pk)
            for pk, reference in rejected.filter(workspace_ref=ws, workflow=workflow)
            .order_by("pk")
            .values_list("pk", "reference")[:MEMBER_CAP]
        ]
        causes.append(
            Cause(
                f"rejected_triggers:{ws}:{workflow}",
                IncidentKind.REJECTED_TRIGGERS,
                QUEUE,
                f"{count} trigger(s) of {workflow or 'unknown workflow'} rejected at intake",
                members,
                {"workflow": workflow, "failure_class": "rejected_at_intake"},
                ws,
            )
        )
    return causes


def per_workspace(cause: Cause) -> list[Cause]:
    """The cause split by its members' workspaces: one cause (one incident) per workspace."""
    workspaces = sorted(
        {m.workspace_id for m in cause.members}, key=lambda ws: (ws is not None, ws or 0)
    )
    if len(workspaces) <= 1:
        cause.workspace_id = workspaces[0] if workspaces else cause.workspace_id
        return [cause]
    return [
        replace(cause, members=[m for m in cause.members if m.workspace_id == ws], workspace_id=ws)
        for ws in workspaces
    ]


def causes_now(*, now: datetime) -> list[Cause]:
    every = (
        destination_causes()
        + backlog_causes(now=now)
        + failure_causes()
        + finding_causes()
        + security_causes()
        + rejected_trigger_causes(now=now)
    )
    return [part for cause in every for part in per_workspace(cause)]
