"""Reads for the health dashboard, the findings screens and /metrics.

Every figure is an aggregate over indexed columns (GROUP BY state, workflow, workspace) or a capped
list, so the cost of the dashboard does not grow with the history. Callers pass the workspaces in
scope; `None` means every workspace (only /metrics, behind its token, does that).
"""

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import TruncHour
from django.urls import reverse
from django.utils import timezone

from outbox.clock import db_now
from outbox.models import (
    NEEDS_PERSON_STATES,
    Attempt,
    AttemptOutcome,
    DestinationHealth,
    DestinationSlot,
    Handoff,
    HandoffEvent,
    HandoffState,
    SlotKind,
)
from reconciliation.merge import WORK_DONE, WORK_FAILED, WORK_UNFINISHED
from reconciliation.models import (
    Finding,
    FindingKind,
    FindingStatus,
    ManualRepair,
    ReconciliationRun,
    RunStatus,
)

S = HandoffState
FAILED_OUTCOMES = (AttemptOutcome.FAILED, AttemptOutcome.UNCERTAIN, AttemptOutcome.ABANDONED)
ACK_WINDOW = timedelta(days=30)
ACK_SAMPLE_CAP = 10_000
# The handoff list's state filter value for `needing_person` (outbox/filters.py).
NEEDS_PERSON_FILTER = "attention"


def _scoped(
    queryset: QuerySet, workspace_ids: Iterable[int] | None, field: str = "workspace_id"
) -> QuerySet:
    if workspace_ids is None:
        return queryset
    return queryset.filter(**{f"{field}__in": list(workspace_ids)})


def handoffs_scoped(workspace_ids: Iterable[int] | None) -> QuerySet[Handoff]:
    return _scoped(Handoff.objects.all(), workspace_ids)


def has_live_finding() -> Exists:
    """True for a handoff whose action key has a finding that is not resolved (open or acknowledged)."""
    return Exists(
        Finding.objects.exclude(status=FindingStatus.RESOLVED).filter(
            action_key=OuterRef("action_key")
        )
    )


def needing_person_condition() -> Q:
    """ "Needs a person", defined once: needs attention or uncertain, or any handoff with a live finding.

    A delivered handoff whose task vanished at the receiver is as much a person's problem as a
    rejected one; every needs-a-person figure (header, list filter, health, /metrics) is this set.
    """
    return Q(state__in=NEEDS_PERSON_STATES) | Q(has_live_finding())


def needing_person(handoffs: QuerySet[Handoff]) -> QuerySet[Handoff]:
    return handoffs.filter(needing_person_condition())


# A count shown on every page stops here: "999+" says as much to a person as the exact figure, and counting
# every open row of a large outbox on each page view would cost more the larger the backlog.
COUNT_CAP = 999


class _CountOf(Subquery):
    """COUNT(*) of the rows of a (sliced) subquery, as a scalar: with a slice, a count that stops."""

    template = "(SELECT COUNT(*) FROM (%(subquery)s) AS bounded)"
    output_field = IntegerField()


def needing_person_counts_bounded(
    workspace_ids: Iterable[int], *, cap: int = COUNT_CAP
) -> dict[int, int]:
    """`needing_person` per workspace (of the workspaces that exist), each count stopped past `cap` (a figure
    above `cap` means "more than `cap`"), in one query whose cost does not grow with the outbox or the backlog.
    A workspace where nobody needs a person is left out.

    Per workspace two parts, each read no further than `cap + 1` rows: the handoffs in a person's states
    (through `handoff_state_open_idx`), and the others whose key has a live finding (driven from the few
    findings). One query with the OR of both would scan the whole outbox, and this runs on every page."""
    from approvals.models import Workspace

    ids = list(workspace_ids)
    if not ids:
        return {}
    of_workspace = Handoff.objects.filter(workspace_id=OuterRef("id")).order_by()
    live_keys = Finding.objects.exclude(status=FindingStatus.RESOLVED).values("action_key")
    in_states = of_workspace.filter(state__in=NEEDS_PERSON_STATES).values("id")[: cap + 1]
    with_finding = (
        of_workspace.exclude(state__in=NEEDS_PERSON_STATES)
        .filter(action_key__in=live_keys)
        .values("id")[: cap + 1]
    )
    rows = (
        Workspace.objects.filter(id__in=ids)
        .order_by()
        .values_list("id")
        .annotate(n=_CountOf(in_states) + _CountOf(with_finding))
    )
    counts = {ws: min(n, cap + 1) for ws, n in rows}
    return {ws: counts[ws] for ws in ids if counts.get(ws)}


def live_findings_of(action_key: str) -> QuerySet[Finding]:
    return (
        Finding.objects.exclude(status=FindingStatus.RESOLVED)
        .filter(action_key=action_key)
        .order_by("kind", "id")
    )


def repairs_of(handoff: Handoff) -> QuerySet[ManualRepair]:
    return ManualRepair.objects.filter(
        workspace_id=handoff.workspace_id, action_key=handoff.action_key
    ).order_by("at", "id")


def handoff_list_url(**params) -> str:
    """A link to the handoff list, with its filter names: state, failure_class, reason_code, workspace, owner, q."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return reverse("outbox:list") + (f"?{query}" if query else "")


def findings_url(**params) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return reverse("reconciliation:findings") + (f"?{query}" if query else "")


@dataclass(frozen=True)
class AckTimes:
    count: int
    median_seconds: float | None
    worst_seconds: float | None
    unacknowledged: int
    oldest_unacknowledged: datetime | None


def time_to_acknowledge(workspace_ids: Iterable[int] | None, *, now: datetime) -> AckTimes:
    """Failure (entering needs_attention) to acknowledgement, over failures of the last 30 days."""
    handoffs = handoffs_scoped(workspace_ids)
    pairs = (
        handoffs.filter(attention_since__gte=now - ACK_WINDOW, acknowledged_at__isnull=False)
        .order_by("-attention_since")
        .values_list("attention_since", "acknowledged_at")[:ACK_SAMPLE_CAP]
    )
    durations = [max((ack - failed).total_seconds(), 0.0) for failed, ack in pairs]
    waiting = handoffs.filter(state=S.NEEDS_ATTENTION, acknowledged_at__isnull=True).aggregate(
        n=Count("id"), oldest=Min("attention_since")
    )
    return AckTimes(
        count=len(durations),
        median_seconds=statistics.median(durations) if durations else None,
        worst_seconds=max(durations) if durations else None,
        unacknowledged=waiting["n"],
        oldest_unacknowledged=waiting["oldest"],
    )


def failure_rates(workspace_ids: Iterable[int] | None) -> list[dict]:
    """Per workflow and rule version: handoffs, how many ever needed attention, and the rate."""
    rows = (
        handoffs_scoped(workspace_ids)
        .exclude(state=S.OBSERVED)
        .order_by()
        .values("workflow", "rule_version")
        .annotate(total=Count("id"), failed=Count("id", filter=Q(attention_since__isnull=False)))
        .order_by("workflow", "rule_version")
    )
    return [{**r, "rate": r["failed"] / r["total"] if r["total"] else 0.0} for r in rows]


def hourly_series(
    workspace_ids: Iterable[int] | None, *, now: datetime, hours: int = 24
) -> list[dict]:
    """Deliveries and failed attempts per hour over the last `hours` hours, oldest first (24 GROUP BY rows)."""
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=hours - 1)
    delivered = dict(
        handoffs_scoped(workspace_ids)
        .filter(delivered_at__gte=start)
        .annotate(hour=TruncHour("delivered_at"))
        .order_by()
        .values_list("hour")
        .annotate(n=Count("id"))
    )
    failed = dict(
        _scoped(Attempt.objects.all(), workspace_ids, "handoff__workspace_id")
        .filter(started_at__gte=start, outcome__in=FAILED_OUTCOMES)
        .annotate(hour=TruncHour("started_at"))
        .order_by()
        .values_list("hour")
        .annotate(n=Count("id"))
    )
    series = []
    for i in range(hours):
        hour = start + timedelta(hours=i)
        series.append(
            {"hour": hour, "delivered": delivered.get(hour, 0), "failed": failed.get(hour, 0)}
        )
    return series


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
    return _scoped(Finding.objects.exclude(status=FindingStatus.RESOLVED), workspace_ids)


def findings_by_kind(workspace_ids: Iterable[int] | None) -> dict[str, int]:
    counts = dict(
        live_findings(workspace_ids).order_by().values_list("kind").annotate(n=Count("id"))
    )
    return {kind: counts.get(kind, 0) for kind in FindingKind.values}


def _state_counts(handoffs: QuerySet[Handoff]) -> tuple[dict[str, int], int]:
    """Handoffs by state, and how many need a person: one GROUP BY, the second as a filtered count."""
    rows = list(
        handoffs.order_by()
        .values_list("state")
        .annotate(n=Count("id"), needing=Count("id", filter=needing_person_condition()))
    )
    return {state: n for state, n, _needing in rows}, sum(needing for _state, _n, needing in rows)


def _figure(value, link: str) -> dict:
    return {"value": value, "link": link}


def _age_seconds(since: datetime | None, now: datetime) -> float | None:
    return (now - since).total_seconds() if since else None


def _drilldown_url(name: str, workspace: int | None) -> str:
    return reverse("reconciliation:drilldown", args=[name]) + (
        f"?workspace={workspace}" if workspace else ""
    )


def _handoff_figures(handoffs: QuerySet[Handoff], *, now: datetime, ws: int | None) -> dict:
    """The figures read from the handoffs themselves: states, the oldest waiting, retries exhausted."""
    by_state, needing = _state_counts(handoffs)
    oldest_pending = handoffs.filter(state=S.PENDING).aggregate(m=Min("created_at"))["m"]
    oldest_in_flight = handoffs.filter(state=S.IN_FLIGHT).aggregate(m=Min("updated_at"))["m"]

    def of_state(state: str) -> dict:
        return _figure(by_state.get(state, 0), handoff_list_url(state=state, workspace=ws))

    return {
        "completed": of_state(S.DELIVERED),
        "pending": of_state(S.PENDING),
        "oldest_pending_seconds": _figure(
            _age_seconds(oldest_pending, now), handoff_list_url(state=S.PENDING, workspace=ws)
        ),
        "in_flight": of_state(S.IN_FLIGHT),
        "oldest_in_flight_seconds": _figure(
            _age_seconds(oldest_in_flight, now), handoff_list_url(state=S.IN_FLIGHT, workspace=ws)
        ),
        "uncertain": of_state(S.UNCERTAIN),
        "needs_attention": of_state(S.NEEDS_ATTENTION),
        "needing_person": _figure(
            needing, handoff_list_url(state=NEEDS_PERSON_FILTER, workspace=ws)
        ),
        "retry_exhausted": _figure(
            handoffs.filter(reason_code="retries_exhausted").count(),
            handoff_list_url(reason_code="retries_exhausted", workspace=ws),
        ),
    }


def _activity_figures(scope: Iterable[int], *, ws: int | None) -> dict:
    """The figures read from attempts, operator events and findings."""
    duplicates = (
        _scoped(Attempt.objects.all(), scope, "handoff__workspace_id")
        .filter(outcome=AttemptOutcome.DUPLICATE)
        .count()
    )
    interventions = (
        _scoped(HandoffEvent.objects.all(), scope, "handoff__workspace_id")
        .exclude(action="")
        .count()
    )
    return {
        "duplicate_preventions": _figure(duplicates, _drilldown_url("duplicates", ws)),
        "outcome_validation_failures": _figure(
            live_findings(scope).filter(outcome_validation=True).count(),
            findings_url(outcome_validation=1, workspace=ws),
        ),
        "manual_interventions": _figure(interventions, _drilldown_url("interventions", ws)),
    }


def _ack_figures(ack: AckTimes, *, ws: int | None) -> dict:
    link = handoff_list_url(state=S.NEEDS_ATTENTION, workspace=ws)
    return {
        "ack_median_seconds": _figure(ack.median_seconds, link),
        "ack_worst_seconds": _figure(ack.worst_seconds, link),
        "unacknowledged": _figure(ack.unacknowledged, link),
    }


def _failure_rates_linked(scope: Iterable[int], *, ws: int | None) -> list[dict]:
    return [
        {
            **r,
            "link": handoff_list_url(state=S.NEEDS_ATTENTION, q=f"{r['workflow']}:", workspace=ws),
        }
        for r in failure_rates(scope)
    ]


def _findings_linked(kinds: dict[str, int], *, ws: int | None) -> list[dict]:
    return [
        {
            "kind": kind,
            "label": FindingKind(kind).label,
            "value": n,
            "link": findings_url(kind=kind, workspace=ws),
        }
        for kind, n in kinds.items()
    ]


def health_summary(
    workspace_ids: list[int], *, now: datetime | None = None, workspace: int | None = None
) -> dict:
    """Every figure of the health dashboard, each with the link to the list behind it."""
    now = now or timezone.now()
    scope = [workspace] if workspace is not None else workspace_ids
    ws = workspace
    kinds = findings_by_kind(scope)
    ack = time_to_acknowledge(scope, now=now)
    figures = {
        **_handoff_figures(handoffs_scoped(scope), now=now, ws=ws),
        **_activity_figures(scope, ws=ws),
        **_ack_figures(ack, ws=ws),
    }
    return {
        "now": now,
        "figures": figures,
        "ack": ack,
        "failure_rates": _failure_rates_linked(scope, ws=ws),
        "findings": _findings_linked(kinds, ws=ws),
        "findings_total": sum(kinds.values()),
        "last_run": last_run(ws),
        "series": hourly_series(scope, now=now),
    }


def duplicate_attempts(workspace_ids: list[int], *, limit: int = 100) -> QuerySet[Attempt]:
    return (
        Attempt.objects.filter(
            handoff__workspace_id__in=workspace_ids, outcome=AttemptOutcome.DUPLICATE
        )
        .select_related("handoff")
        .order_by("-started_at", "-id")[:limit]
    )


def manual_interventions(workspace_ids: list[int], *, limit: int = 100) -> QuerySet[HandoffEvent]:
    return (
        HandoffEvent.objects.filter(handoff__workspace_id__in=workspace_ids)
        .exclude(action="")
        .select_related("handoff")
        .order_by("-at", "-id")[:limit]
    )


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
    status: str = "live",
    kind: str = "",
    workspace: int | None = None,
    text: str = "",
    outcome_validation: bool = False,
) -> QuerySet:
    """The findings list's filter, newest first: "live" is everything not resolved; unknown values are ignored."""
    if status == "live":
        findings = findings.exclude(status=FindingStatus.RESOLVED)
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


# --- The business outcome: three owners, three answers ----------------------------------------------


@dataclass(frozen=True)
class OwnerAnswer:
    """One owner's answer about a handoff. `value` is "yes", "no", "unknown", "failed" or "not_reported"."""

    question: str
    owner: str
    value: str
    detail: str

    @property
    def label(self) -> str:
        return {"not_reported": "not reported yet"}.get(self.value, self.value)


@dataclass(frozen=True)
class WorkOutcome:
    approved: OwnerAnswer
    task_created: OwnerAnswer
    work_done: OwnerAnswer

    def __iter__(self):
        return iter((self.approved, self.task_created, self.work_done))

    @property
    def complete(self) -> bool:
        """Complete only when the work is done: an acknowledged handoff proves the task, not the work."""
        return self.work_done.value == "yes"


def _approved_answer(handoff: Handoff) -> OwnerAnswer:
    # An outbox row is written only in the transaction that approves its request revision.
    detail = f"{handoff.source_ref} approved" + (
        f" under {handoff.rule_version}" if handoff.rule_version else ""
    )
    return OwnerAnswer("Approved?", "source application", "yes", detail)


def _task_answer(handoff: Handoff) -> OwnerAnswer:
    question, owner = "Task created?", "receiving application"
    if handoff.state == S.DELIVERED:
        how = (
            "receipt validated"
            if handoff.receipt.get("found_by") != "lookup"
            else "found by lookup"
        )
        return OwnerAnswer(question, owner, "yes", f"task {handoff.destination_id} ({how})")
    if handoff.state in (S.UNCERTAIN, S.IN_FLIGHT):
        return OwnerAnswer(
            question,
            owner,
            "unknown",
            f"{handoff.get_state_display().lower()}: outcome not known yet",
        )
    return OwnerAnswer(question, owner, "no", f"handoff {handoff.get_state_display().lower()}")


def _work_answer(handoff: Handoff) -> OwnerAnswer:
    question, owner = "Work done?", "people doing the task"
    if handoff.state != S.DELIVERED:
        return OwnerAnswer(question, owner, "no", "no task at the receiver yet")
    checked = (
        f" (as of {handoff.work_checked_at:%Y-%m-%d %H:%M} UTC)" if handoff.work_checked_at else ""
    )
    status = handoff.work_status
    if status == WORK_DONE:
        return OwnerAnswer(question, owner, "yes", f"the receiver reports the task done{checked}")
    if status == WORK_FAILED:
        return OwnerAnswer(
            question, owner, "failed", f"the receiver reports the work failed{checked}"
        )
    if status in WORK_UNFINISHED:
        return OwnerAnswer(question, owner, "no", f"task {status.replace('_', ' ')}{checked}")
    return OwnerAnswer(
        question, owner, "not_reported", "the receiver has not reported the task's status yet"
    )


def work_outcome(handoff: Handoff) -> WorkOutcome:
    """Approved? (source), task created? (receiver, validated receipt), work done? (the task's status, read back
    by reconciliation). Reads only the handoff's own fields: no query."""
    return WorkOutcome(_approved_answer(handoff), _task_answer(handoff), _work_answer(handoff))


@dataclass(frozen=True)
class DestinationOverview:
    """One destination on the health page: its breaker, the limits its operators set, the Retry-After hold,
    and the slots in use now (calls in flight, requests within the last second)."""

    health: DestinationHealth
    held: bool
    calls_in_flight: int
    requests_last_second: int

    @property
    def name(self) -> str:
        return self.health.name


def destination_names() -> set[str]:
    """The destinations operators may set limits for: the configured one and every one seen so far."""
    return {
        settings.HANDOFF_DESTINATION.get("name", "receiver"),
        *DestinationHealth.objects.values_list("name", flat=True),
    }


def destinations_overview(name: str | None = None) -> list[DestinationOverview]:
    """Every destination (or one), in name order, in two queries whatever their number. A destination not seen
    yet shows the configured default limits."""
    held = ExpressionWrapper(Q(hold_until__gt=db_now()), output_field=BooleanField())
    rows = DestinationHealth.objects.annotate(held=held).order_by("name")
    slots = DestinationSlot.objects.filter(
        free_at__gt=db_now(),
    ).order_by()
    if name is not None:
        rows, slots = rows.filter(name=name), slots.filter(destination=name)
    health = {row.name: row for row in rows}
    in_use = {
        (d, kind): n
        for d, kind, n in slots.values_list("destination", "kind").annotate(n=Count("id"))
    }
    names = sorted(
        {name}
        if name is not None
        else {*health, settings.HANDOFF_DESTINATION.get("name", "receiver")}
    )
    return [
        DestinationOverview(
            health=health.get(n) or DestinationHealth(name=n),
            held=bool(getattr(health.get(n), "held", False)),
            calls_in_flight=in_use.get((n, SlotKind.CONCURRENCY), 0),
            requests_last_second=in_use.get((n, SlotKind.RATE), 0),
        )
        for n in names
    ]
