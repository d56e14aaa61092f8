"""The truth of the claims about records other than handoffs and destinations (`console.claims.record_claim`,
`counted`): findings, reconciliation runs, triggers, archived handoffs, bulk jobs, replays and their
items, destinations' configurations, incidents' members, requests' revisions, and a workspace's counts on
Home. Read from the tables (`values()`), counted from the rows themselves where a screen shows a count (a
replay's items previewed, an incident's members settled), never from the counters the screens read."""

import re
from collections.abc import Callable
from email import policy
from email.parser import BytesParser
from pathlib import Path

from django.conf import settings
from django.db.models import Q

from approvals.models import Request, TriggerRecord
from incidents.models import Incident, IncidentMember
from incidents.models.replays import Replay, ReplayItem
from outbox.destinations import DestinationUnavailable, destination_named
from outbox.models import (
    ArchivedHandoff,
    Attempt,
    BulkJob,
    DestinationConfig,
    Handoff,
    HandoffEvent,
)
from reconciliation.models import Finding, ReconciliationRun

NEEDS_PERSON = ("needs_attention", "uncertain")
COUNT_CAP = 999  # Home's bounded count: past it, any number above the cap


def _shown(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _stored(model, field: str) -> Callable[[int], set[str] | None]:
    """The value the record holds."""

    def truth(pk: int) -> set[str] | None:
        row = model.objects.filter(pk=pk).values(field).first()
        return None if row is None else {_shown(row[field])}

    return truth


def _exists(model, pk: int) -> bool:
    return model.objects.filter(pk=pk).exists()


def _counted(model, count: Callable[[int], int]) -> Callable[[int], set[str] | None]:
    def truth(pk: int) -> set[str] | None:
        return {str(count(pk))} if _exists(model, pk) else None

    return truth


def _items(pk: int, **filters) -> int:
    return ReplayItem.objects.filter(replay_id=pk, **filters).count()


def _members(pk: int, **filters) -> int:
    return IncidentMember.objects.filter(incident_id=pk, **filters).count()


def _bulk_total(pk: int) -> set[str] | None:
    row = BulkJob.objects.filter(pk=pk).values("handoff_ids").first()
    return None if row is None else {str(len(row["handoff_ids"]))}


def _archived_task(pk: int) -> set[str] | None:
    row = ArchivedHandoff.objects.filter(pk=pk).values("task_id").first()
    return None if row is None else {row["task_id"] or ""}


def _run_findings_total(pk: int) -> set[str] | None:
    row = ReconciliationRun.objects.filter(pk=pk).values("findings_by_kind").first()
    return None if row is None else {str(sum(row["findings_by_kind"].values()))}


def workspace_awaiting(ws: int) -> int:
    return Request.objects.filter(workspace_id=ws, state="awaiting_approval").count()


def workspace_needing_person(ws: int) -> int:
    """Handoffs a person must look at: needing attention or uncertain, or with a finding not resolved."""
    live = Finding.objects.exclude(status="resolved").values("action_key")
    rows = Handoff.objects.business().filter(workspace_id=ws)
    return rows.filter(Q(state__in=NEEDS_PERSON) | Q(action_key__in=live)).count()


def _workspace(count: Callable[[int], int], *, cap: int | None = None):
    def truth(ws: int) -> set[str] | None:
        n = count(ws)
        return {str(n)} if cap is None or n <= cap else {str(m) for m in range(cap + 1, n + 1)}

    return truth


# Each claim about a record: its subject's kind (`<kind>:<pk>`) and the values true now (None: no record).
RECORD_TRUTHS: dict[str, Callable[[int], set[str] | None]] = {
    "request.revision": _stored(Request, "revision"),
    "trigger.outcome": _stored(TriggerRecord, "outcome"),
    "finding.status": _stored(Finding, "status"),
    "run.status": _stored(ReconciliationRun, "status"),
    "run.keys_compared": _stored(ReconciliationRun, "keys_compared"),
    "run.findings_total": _run_findings_total,
    "run.new_findings": _stored(ReconciliationRun, "new_findings"),
    "run.resolved_findings": _stored(ReconciliationRun, "resolved_findings"),
    "archived.final_state": _stored(ArchivedHandoff, "final_state"),
    "archived.task_id": _archived_task,
    "archived.work_status": _stored(ArchivedHandoff, "work_status"),
    "bulk_job.state": _stored(BulkJob, "state"),
    "bulk_job.position": _stored(BulkJob, "position"),
    "bulk_job.done": _stored(BulkJob, "done"),
    "bulk_job.total": _bulk_total,
    "destination_config.enabled": _stored(DestinationConfig, "enabled"),
    "replay.state": _stored(Replay, "state"),
    "replay.total": _counted(Replay, _items),
    "replay.previewed": _counted(Replay, lambda pk: _items(pk) - _items(pk, verdict="")),
    "replay.applied": _counted(Replay, lambda pk: _items(pk) - _items(pk, outcome="")),
    "replay_item.verdict": _stored(ReplayItem, "verdict"),
    "replay_item.outcome": _stored(ReplayItem, "outcome"),
    "incident.member_count": _counted(Incident, _members),
    "incident.settled_count": _counted(Incident, lambda pk: _members(pk, settled_at__isnull=False)),
    "workspace.awaiting": _workspace(workspace_awaiting),
    "workspace.needing_person": _workspace(workspace_needing_person, cap=COUNT_CAP),
}


def _owner(pk: int) -> set[str] | None:
    row = Incident.objects.filter(pk=pk).values("owner__username").first()
    return None if row is None else {row["owner__username"] or ""}


def _sla(pk: int) -> set[str] | None:
    row = Incident.objects.filter(pk=pk).values("sla_due_at").first()
    return None if row is None else {row["sla_due_at"].isoformat() if row["sla_due_at"] else ""}


RECORD_TRUTHS |= {"incident.owner": _owner, "incident.sla_due_at": _sla}


def _resend_is_safe(destination: str) -> bool:
    """The destination's declared contract: a repeat with the same key and body answers the original."""
    try:
        return destination_named(destination).replays_same_key
    except DestinationUnavailable:
        return False


def handoff_recommended(pk: int) -> set[str] | None:
    """What the safest next step may recommend, from the handoff's row and its key's findings: a finding not
    resolved, a repair; a step whose outcome is unknown is never to be sent again unless its destination
    replays the original answer to a repeat (then a retry is how to learn the outcome); a payload refused for
    good is corrected, never retried; a settled or moving step needs nothing, a step in backoff may run now."""
    row = Handoff.objects.filter(pk=pk).values().first()
    if row is None:
        return None
    if Finding.objects.filter(action_key=row["action_key"]).exclude(status="resolved").exists():
        return {"repair"}
    state, failure = row["state"], row["failure_class"]
    retry = {"retry"} if _resend_is_safe(row["destination"]) else set()
    if state == "pending":
        return {"none", "run_now"}
    if state == "uncertain":
        return {"reconcile", *retry}
    if state != "needs_attention":
        return {"none"}
    if failure in ("uncertain", "malformed"):
        return {"reconcile", "compensate", *retry}
    if failure in ("permanent", "conflict"):
        return {"correct", "compensate"}
    return {"retry", "compensate"}


RECORD_TRUTHS |= {
    "attempt.outcome": _stored(Attempt, "outcome"),
    "handoff_event.to_state": _stored(HandoffEvent, "to_state"),
    "handoff.recommended": handoff_recommended,
}


def mailbox_recipient(message_id: str) -> set[str] | None:
    """The recipients of the message the demo mailbox holds with this Message-ID, read from its Maildir files
    (the receiver's own records), each address's local part hidden as the page promises; None if none."""
    directory = settings.DEMO_MAILBOX_DIR
    if not directory:
        return None
    for sub in ("new", "cur"):
        for path in (Path(directory) / sub).glob("*"):
            message = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
            if str(message["Message-ID"]) == message_id:
                return {re.sub(r"[^\s<>,\"']+@", "…@", str(message["To"]))}
    return None
