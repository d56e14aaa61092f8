"""Manual repairs: what a person did outside the system, recorded with the facts it accounted for.

A repair closes its finding and settles (or notes on) its handoff through the outbox's services. It
remembers the facts it accounted for (kind, key, what each side held), so a later run that sees
exactly those facts does not reopen the finding; any other discrepancy opens a new one.
"""

import contextlib

from django.db import transaction

from lib.databases import DB
from outbox.clock import db_now
from outbox.destinations import Destination
from outbox.errors import HandoffNotFound
from outbox.models import Handoff
from outbox.services import (
    PERSON_LOOKUP_WAIT_SECONDS,
    handoff_lock,
    handoff_note_check,
    handoff_settle_manually,
)
from outbox.services.lookup_limits import lookups_under_limits
from reconciliation.classification import facts_fingerprint
from reconciliation.errors import (
    FindingNotFound,
    InvalidFindingTransition,
    RepairDetailsRequired,
    RepairNotConfirmed,
)
from reconciliation.models import Finding, FindingStatus, ManualRepair
from reconciliation.services.findings import finding_lock, finding_move
from reconciliation.services.lookups import lookup_key


def _repair_target(
    finding_id: int | None, handoff_id: int | None
) -> tuple[Finding | None, Handoff | None]:
    """The locked finding and the handoff a repair is about (the handoff locks in its own service)."""
    finding = finding_lock(finding_id) if finding_id is not None else None
    if finding is not None and finding.status == FindingStatus.RESOLVED:
        raise InvalidFindingTransition(finding.pk, finding.status, FindingStatus.RESOLVED)
    handoff_id = handoff_id if handoff_id is not None else (finding.handoff_id if finding else None)
    handoff = None
    if handoff_id is not None:
        with contextlib.suppress(HandoffNotFound):
            handoff = handoff_lock(handoff_id)
    if finding is None and handoff is None:
        raise FindingNotFound(finding_id)
    return finding, handoff


def _check_task_at_receiver(action_key: str, task_id: str, destination: Destination) -> None:
    """Where the receiver can be asked, the task id a person names must be the one it holds for the key."""
    task, error = lookup_key(destination, action_key)
    if error:
        return
    if task is None or task.task_id != task_id:
        held = f"task {task.task_id}" if task else "no task"
        raise RepairNotConfirmed(f"the receiver holds {held} for {action_key}, not task {task_id}")


def _check_named_task(
    finding_id: int | None,
    handoff_id: int | None,
    receiver_task_id: str,
    destination: Destination | None,
) -> None:
    """A repair that names the receiver's task is checked against the receiver first, outside any transaction."""
    if not receiver_task_id:
        return
    key = _subject_key(finding_id, handoff_id)
    if key:
        _check_task_at_receiver(
            key,
            receiver_task_id,
            lookups_under_limits(
                destination, worker="repair-check", wait_seconds=PERSON_LOOKUP_WAIT_SECONDS
            ),
        )


def manual_repair_record(
    *,
    actor,
    what_was_done: str,
    evidence: str = "",
    receiver_task_id: str = "",
    finding_id: int | None = None,
    handoff_id: int | None = None,
    destination: Destination | None = None,
) -> ManualRepair:
    """Record what a person did outside the system; close the finding and/or settle the handoff with it.

    The repair remembers the facts it accounted for (kind, key, what each side held), so a later run
    that sees exactly those facts does not reopen the finding; any other discrepancy opens a new one.
    """
    what_was_done, evidence, receiver_task_id = (
        what_was_done.strip(),
        evidence.strip(),
        receiver_task_id.strip(),
    )
    if not what_was_done:
        raise RepairDetailsRequired("say what was done outside the system")
    _check_named_task(finding_id, handoff_id, receiver_task_id, destination)
    with transaction.atomic(using=DB):
        finding, handoff = _repair_target(finding_id, handoff_id)
        state = _repair_handoff(
            handoff,
            finding,
            actor=actor,
            receiver_task_id=receiver_task_id,
            reason=_repair_reason(what_was_done, evidence, finding),
        )
        repair = ManualRepair.objects.using(DB).create(
            **_subject_fields(finding, handoff),
            actor=actor,
            actor_label=actor.get_username(),
            what_was_done=what_was_done,
            evidence=evidence,
            receiver_task_id=receiver_task_id,
            resulting_state=state,
        )
        if finding is not None:
            _close_finding(finding, actor=actor, what_was_done=what_was_done)
    return repair


def _close_finding(finding: Finding, *, actor, what_was_done: str) -> None:
    finding_move(
        finding,
        FindingStatus.RESOLVED,
        actor=actor,
        action="repaired",
        event_note=what_was_done,
        resolved_at=db_now(),
        resolved_by=actor,
        note=what_was_done,
    )


def _subject_fields(finding: Finding | None, handoff: Handoff | None) -> dict:
    """What a repair is about, and the facts it accounted for (a finding's kind, key and evidence)."""
    if finding is None:
        return {
            "workspace_id": handoff.workspace_id,
            "action_key": handoff.action_key,
            "handoff_id": handoff.pk,
        }
    return {
        "workspace_id": finding.workspace_id,
        "action_key": finding.action_key,
        "finding": finding,
        "handoff_id": handoff.pk if handoff else None,
        "covered_kind": finding.kind,
        "covered_fingerprint": facts_fingerprint(
            finding.source_evidence, finding.receiver_evidence
        ),
    }


def _subject_key(finding_id: int | None, handoff_id: int | None) -> str:
    if handoff_id is not None:
        return (
            Handoff.objects.using(DB)
            .values_list("action_key", flat=True)
            .filter(pk=handoff_id)
            .first()
            or ""
        )
    return (
        Finding.objects.using(DB).values_list("action_key", flat=True).filter(pk=finding_id).first()
        or ""
    )


def _repair_handoff(
    handoff: Handoff | None, finding: Finding | None, *, actor, receiver_task_id: str, reason: str
) -> str:
    """Settle the handoff where the repair says what the receiver holds; else write it into its history."""
    if handoff is None:
        return ""
    if finding is None or receiver_task_id or handoff.manual_settle_applies:
        return handoff_settle_manually(
            handoff_id=handoff.pk, actor=actor, receiver_task_id=receiver_task_id, reason=reason
        ).state
    handoff_note_check(handoff_id=handoff.pk, actor=actor, reason=reason, action="manual_repair")
    return handoff.state


def _repair_reason(what_was_done: str, evidence: str, finding: Finding | None) -> str:
    about = (
        f"manual repair of {finding.get_kind_display().lower()}: " if finding else "manual repair: "
    )
    return about + what_was_done + (f" (evidence: {evidence})" if evidence else "")
