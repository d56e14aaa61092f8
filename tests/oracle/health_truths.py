"""The truth of Health's figures beyond the state counts and the delivered window (`tests/oracle/truth.py`):
the handoffs needing a person, the ages of the oldest pending and in-flight handoffs, the times from a failure
to its acknowledgement, duplicate effects prevented, manual interventions, outcome validation failures, the
failure rates by workflow and rule version, open findings by kind, the incidents by severity, and the
destinations' limits. Counted from the rows (never through the selectors Health reads); a figure that depends
on the clock is true at the look's start (`Truth.started`) or at the check (`Truth.now`); an age is
claimed as the time it is counted from."""

import statistics
from collections.abc import Callable
from datetime import timedelta

from incidents.models import Incident
from outbox.models import Attempt, Handoff, HandoffEvent
from reconciliation.models import Finding
from tests.oracle.records import COUNT_CAP, workspace_needing_person

WINDOW = timedelta(hours=24)
ACK_WINDOW = timedelta(days=30)


def _capped(n: int) -> set[str]:
    return {str(n)} if n <= COUNT_CAP else {str(COUNT_CAP + 1)}


def _oldest(state: str, field: str):
    """Since when the oldest row of `state` has waited: the page's age is its moment minus this time."""

    def truth(t, workspaces: list[int], parts: list[str]) -> set[str]:
        rows = Handoff.objects.business().filter(workspace_id__in=workspaces, state=state)
        oldest = rows.order_by(field).values_list(field, flat=True).first()
        return {"none" if oldest is None else oldest.isoformat()}

    return truth


def _ack_durations(t, workspaces: list[int], moment) -> list[float]:
    rows = (
        Handoff.objects.business()
        .filter(
            workspace_id__in=workspaces,
            attention_since__gte=moment - ACK_WINDOW,
            acknowledged_at__isnull=False,
        )
        .values_list("attention_since", "acknowledged_at")
    )
    return [max((ack - failed).total_seconds(), 0.0) for failed, ack in rows]


def _ack(pick: Callable[[list[float]], float]):
    def truth(t, workspaces: list[int], parts: list[str]) -> set[str]:
        out = set()
        for moment in (t.started, t.now):
            durations = _ack_durations(t, workspaces, moment)
            out.add(str(round(pick(durations))) if durations else "none")
        return out

    return truth


def _acknowledged(t, workspaces: list[int], parts: list[str]) -> set[str]:
    return {str(len(_ack_durations(t, workspaces, m))) for m in (t.started, t.now)}


def _unacknowledged(t, workspaces: list[int], parts: list[str]) -> set[str]:
    rows = Handoff.objects.business().filter(
        workspace_id__in=workspaces, state="needs_attention", acknowledged_at__isnull=True
    )
    return {str(rows.count())}


def _duplicates(t, workspaces: list[int], parts: list[str]) -> set[str]:
    rows = Attempt.objects.filter(handoff__workspace_id__in=workspaces, outcome="duplicate")
    return _capped(rows.count())


def _interventions(t, workspaces: list[int], parts: list[str]) -> set[str]:
    rows = HandoffEvent.objects.filter(handoff__workspace_id__in=workspaces).exclude(action="")
    rows = rows.exclude(
        actor=None
    )  # a person's: a receiver's status event or a sweep's names nobody
    return _capped(rows.count())


def _live_findings(workspaces: list[int]):
    return Finding.objects.filter(workspace_id__in=workspaces).exclude(status="resolved")


def _validation_failures(t, workspaces: list[int], parts: list[str]) -> set[str]:
    return {str(_live_findings(workspaces).filter(outcome_validation=True).count())}


def _open_findings(t, workspaces: list[int], parts: list[str]) -> set[str]:
    return {str(_live_findings(workspaces).filter(kind=parts[0]).count())}


def _needing_person(t, workspaces: list[int], parts: list[str]) -> set[str]:
    return _capped(sum(workspace_needing_person(ws) for ws in workspaces))


def _rule_rows(t, workspaces: list[int], parts: list[str], moment):
    workflow, rule_version = parts
    return (
        Handoff.objects.business()
        .filter(
            workspace_id__in=workspaces,
            workflow=workflow,
            rule_version=rule_version,
            created_at__gte=moment - WINDOW,
        )
        .exclude(state="observed")
    )


def _rule_handoffs(t, workspaces: list[int], parts: list[str]) -> set[str]:
    return {str(_rule_rows(t, workspaces, parts, m).count()) for m in (t.started, t.now)}


def _rule_needed_attention(t, workspaces: list[int], parts: list[str]) -> set[str]:
    return {
        str(_rule_rows(t, workspaces, parts, m).filter(attention_since__isnull=False).count())
        for m in (t.started, t.now)
    }


def _incidents(severity: str):
    def truth(t, workspaces: list[int], parts: list[str]) -> set[str]:
        rows = Incident.objects.filter(workspace_id__in=workspaces, severity=severity)
        return {str(rows.exclude(state="resolved").count())}

    return truth


# Each Health figure's truth, from the workspaces counted and the row it belongs to (`health:7,8|a|b`).
HEALTH_TRUTHS = {
    "needing_person": _needing_person,
    "oldest_pending_seconds": _oldest("pending", "created_at"),
    "oldest_in_flight_seconds": _oldest("in_flight", "updated_at"),
    "ack_median_seconds": _ack(statistics.median),
    "ack_worst_seconds": _ack(max),
    "acknowledged": _acknowledged,
    "unacknowledged": _unacknowledged,
    "duplicate_preventions": _duplicates,
    "manual_interventions": _interventions,
    "outcome_validation_failures": _validation_failures,
    "open_findings": _open_findings,
    "rule_handoffs": _rule_handoffs,
    "rule_needed_attention": _rule_needed_attention,
    "incidents_paging": _incidents("page"),
    "incidents_queued": _incidents("queue"),
}


def health_subject(subject: str) -> tuple[list[int], list[str]] | None:
    """`health:7,8|onboarding|3` as ([7, 8], ["onboarding", "3"]); None if it is no Health subject."""
    head, _, rest = subject.partition(":")
    if head != "health":
        return None
    counted, *parts = rest.split("|")
    return [int(ws) for ws in counted.split(",") if ws], parts
