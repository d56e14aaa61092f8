"""Erasure on request (GDPR article 17): an authorised person erases one data subject's personal fields
from every request of theirs (all revisions), its decisions' rendered requests, its history and triggers,
and through the outbox (`outbox/services/erasure.py`) its handoffs, attempts, events and archive. Kept:
action keys, payload hashes, receipts, decisions and reconciliation's verdicts. One `Erasure` row per
workspace is the proof: who, when, why, how many rows of each kind, none of the erased data
(docs/security.md, "Erasure")."""

from collections import Counter
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import (
    Approval,
    Request,
    RequestEvent,
    RequestState,
    TriggerRecord,
)
from approvals.rules import rules_for, schema_searchable_fields
from lib.databases import DB
from outbox.models import Erasure
from outbox.search_text import EMAIL_KEY_PART
from outbox.services.erasure import (
    Eraser,
    ErasureRefused,
    erasure_parts_run,
    handoffs_erase,
    handoffs_refusing_erasure,
    still_sendable,
    subject_values,
)

ERASE_PERMISSION = "outbox.erase_personal_data"
# A revision in these states may still be decided and sent: it is cancelled or rejected before an erasure.
UNDECIDED_STATES = (RequestState.RECEIVED, RequestState.VALIDATED, RequestState.AWAITING_APPROVAL)
# What an erasure counts, in the order its proof lists them.
ERASED_KINDS = (
    "requests",
    "decisions",
    "request_events",
    "triggers",
    "handoffs",
    "attempts",
    "handoff_events",
    "status_events",
    "case_holds",
    "archived_handoffs",
)


@dataclass(frozen=True)
class Subject:
    """Who is erased: by e-mail (any field whose name holds "email", case ignored), or by a business id
    (one named top-level field, exactly)."""

    email: str = ""
    field: str = ""
    value: str = ""

    @property
    def needle(self) -> str:
        return self.email or self.value

    def matches(self, payload: object) -> bool:
        if not isinstance(payload, dict):
            return False
        if self.email:
            return any(
                EMAIL_KEY_PART in str(key).lower()
                and isinstance(value, str)
                and value.strip().lower() == self.email.lower()
                for key, value in payload.items()
            )
        return self.field in payload and str(payload[self.field]) == self.value


def subject_named(*, email: str = "", business_id: str = "") -> Subject:
    """The subject a person typed: `email`, or `business_id` as FIELD=VALUE; refused with the field named."""
    email, business_id = email.strip(), business_id.strip()
    if bool(email) == bool(business_id):
        raise InvalidPayload(["email, business_id: exactly one of them"])
    if email:
        if "@" not in email:
            raise InvalidPayload(["email: an e-mail address"])
        return Subject(email=email)
    field, _, value = business_id.partition("=")
    if not field.strip() or not value.strip():
        raise InvalidPayload(["business_id: FIELD=VALUE, for example client_id=C-1001"])
    return Subject(field=field.strip(), value=value.strip())


def _subject_cases(subject: Subject) -> list[Request]:
    """Every revision of every request one of whose revisions names the subject, by workspace and id."""
    candidates = Request.objects.using(DB).annotate(text=Cast("payload", TextField()))
    found = [
        r
        for r in candidates.filter(text__icontains=subject.needle).only(
            "workspace_id", "workflow", "number", "payload"
        )
        if subject.matches(r.payload)
    ]
    cases = {(r.workspace_id, r.workflow, r.number) for r in found}
    revisions = []
    for workspace_id, workflow, number in sorted(cases):
        revisions += Request.objects.using(DB).filter(
            workspace_id=workspace_id, workflow=workflow, number=number
        )
    return sorted(revisions, key=lambda r: (r.workspace_id, r.pk))


def _refusals(revisions: list[Request]) -> list[str]:
    undecided = [
        f"request {r.number} revision {r.revision} of workspace {r.workspace_id}: awaits a decision; "
        "reject or cancel it first"
        for r in revisions
        if r.state in UNDECIDED_STATES
    ]
    sendable = [
        still_sendable([key])
        for key in handoffs_refusing_erasure(
            [r.pk for r in revisions], {r.workflow for r in revisions}
        )
    ]
    return undecided + sendable


def _eraser(subject: Subject, revisions: list[Request]) -> Eraser:
    fields = sorted(
        {
            f
            for w in {r.workflow for r in revisions}
            for f in schema_searchable_fields(rules_for(w).schema)
        }
        | ({subject.field} if subject.field else set())
    )
    values = {subject.needle}
    for r in revisions:
        values |= subject_values(r.payload, fields=fields)
    return Eraser(values, fields)


def subject_erase(*, subject: Subject, reason: str, actor) -> list[Erasure]:
    """Erase the subject's personal fields everywhere they are stored; one Erasure per workspace touched
    (none when no request names the subject). Raises ApprovalDenied without the permission, InvalidPayload
    without a reason, ErasureRefused while a request of theirs may still be decided or sent."""
    if not actor.has_perm(ERASE_PERMISSION):
        raise ApprovalDenied(f"{actor} may not erase personal data")
    if not reason.strip():
        raise InvalidPayload(["reason: required"])
    revisions = _subject_cases(subject)
    refusals = _refusals(revisions)
    if refusals:
        raise ErasureRefused("; ".join(refusals))
    eraser = _eraser(subject, revisions)
    erasures = []
    with transaction.atomic(using=DB):
        for workspace_id in sorted({r.workspace_id for r in revisions}):
            ids = [r.pk for r in revisions if r.workspace_id == workspace_id]
            erasure = Erasure.objects.using(DB).create(
                workspace_id=workspace_id, erased_by=actor, reason=reason.strip()
            )
            counts = _erase_requests(erasure, ids, eraser)
            counts += handoffs_erase(
                erasure=erasure,
                source_ids=ids,
                workflows={r.workflow for r in revisions},
                eraser=eraser,
            )
            erasure_parts_run(erasure=erasure, eraser=eraser)
            erasure.counts = {kind: counts[kind] for kind in ERASED_KINDS}
            erasure.save(update_fields=["counts"])
            erasures.append(erasure)
    return erasures


def _erase_requests(erasure: Erasure, ids: list[int], eraser: Eraser) -> Counter:
    counts = Counter()
    # Locked in id order; `update()` leaves updated_at as it was (an erasure is not a move of the request).
    for r in Request.objects.using(DB).select_for_update().filter(pk__in=ids).order_by("pk"):
        Request.objects.using(DB).filter(pk=r.pk).update(
            payload=eraser.document(r.payload),
            search_text=eraser.text(r.search_text or "") or None,
            erasure=erasure,
        )
        counts["requests"] += 1
    for d in Approval.objects.using(DB).filter(request_id__in=ids):
        Approval.objects.using(DB).filter(pk=d.pk).update(
            requests=None if d.requests is None else eraser.document(d.requests),
            reason=eraser.text(d.reason),
        )
        counts["decisions"] += 1
    for e in RequestEvent.objects.using(DB).filter(request_id__in=ids).only("reason"):
        if eraser.text(e.reason) != e.reason:
            RequestEvent.objects.using(DB).filter(pk=e.pk).update(reason=eraser.text(e.reason))
            counts["request_events"] += 1
    triggers = Q(request_id__in=ids) | Q(duplicate_of__request_id__in=ids)
    for t in TriggerRecord.objects.using(DB).filter(triggers):
        TriggerRecord.objects.using(DB).filter(pk=t.pk).update(
            document=eraser.document(t.document),
            response=eraser.document(t.response),
            reasons=eraser.document(t.reasons),
        )
        counts["triggers"] += 1
    return counts


__all__ = ["ERASE_PERMISSION", "ErasureRefused", "Subject", "subject_erase", "subject_named"]
