"""Erasure on request (GDPR article 17), the outbox's part: one data subject's values erased from the
handoffs of their requests, their attempts and events, and the archive, each row marked with the erasure
(docs/security.md, "Erasure"). Kept: action keys, payload hashes, receipts, decisions and reconciliation's
verdicts, so that an erased handoff is still settled and reconciled by key and hash.

The subject's values are found by the caller (`approvals/services/erasure.py`, which knows the requests);
here they are replaced wherever the outbox stored them: a payload field whose name is personal, any stored
string that holds one of the values, and the same values inside free text (an error, an event's reason, an
attempt's detail), whatever their case.

Another app that quotes those rows registers its own part (`erasure_part_register`, from its
`AppConfig.ready`): the incidents side's, whose evidence quotes a failure's answer. The caller runs the parts
(`erasure_parts_run`) in the same transaction; the outbox imports no app for it."""

from collections import Counter
from collections.abc import Callable, Iterable

import re2
from django.db import transaction
from django.db.models import Q, QuerySet

from lib.databases import DB
from outbox.errors import OutboxError
from outbox.models import (
    ERASED,
    ArchivedHandoff,
    Attempt,
    CaseHold,
    Erasure,
    Handoff,
    HandoffEvent,
    StatusEvent,
)
from outbox.models.states import HandoffState
from outbox.redaction import PERSONAL_KEY_PARTS
from outbox.search_text import ALWAYS_SEARCHABLE

S = HandoffState
# A payload field named like this holds a person's data: erased whatever its value.
ERASED_KEY_PARTS = (*PERSONAL_KEY_PARTS, "name")
# Values shorter than this are not looked for inside free text: they would erase ordinary words.
MIN_TEXT_VALUE = 3
# While a handoff is in these states its payload may still be sent: erasing it would send "[erased]".
SENDABLE_STATES = (S.PENDING, S.IN_FLIGHT)


class ErasureRefused(OutboxError):
    """The erasure cannot be made now; the message names what stands in the way."""


def is_personal_key(key: object, fields: Iterable[str] = ()) -> bool:
    lowered = str(key).lower()
    return (
        key in ALWAYS_SEARCHABLE
        or key in set(fields)
        or any(p in lowered for p in ERASED_KEY_PARTS)
    )


def subject_values(payload: object, *, fields: Iterable[str] = ()) -> set[str]:
    """The values of a payload's personal fields (top level and nested), as strings."""
    found: set[str] = set()
    if isinstance(payload, dict):
        for key, value in payload.items():
            if is_personal_key(key, fields) and isinstance(value, str | int | float):
                if not isinstance(value, bool) and str(value).strip():
                    found.add(str(value).strip())
            else:
                found |= subject_values(value, fields=fields)
    elif isinstance(payload, list):
        for item in payload:
            found |= subject_values(item, fields=fields)
    return found


class Eraser:
    """Replaces a subject's values in JSON documents and in text."""

    def __init__(self, values: Iterable[str], fields: Iterable[str] = ()):
        self.values = sorted({v for v in values if v}, key=len, reverse=True)
        self.lowered = [v.lower() for v in self.values]
        self.fields = tuple(fields)
        words = [re2.escape(v) for v in self.values if len(v) >= MIN_TEXT_VALUE]
        self._pattern = re2.compile("(?i)(" + "|".join(words) + ")") if words else None

    def text(self, text: str) -> str:
        if not text or self._pattern is None:
            return text
        return self._pattern.sub(ERASED, text)

    def _holds_value(self, text: str) -> bool:
        lowered = text.lower()
        return any(v in lowered for v in self.lowered)

    def document(self, value: object, key: object = None) -> object:
        """A copy of a JSON value with every personal field and every string holding a value erased."""
        if isinstance(value, dict):
            return {k: self.document(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.document(v, key) for v in value]
        return ERASED if self._erases(value, key) else value

    def _erases(self, value: object, key: object) -> bool:
        personal = key is not None and is_personal_key(key, self.fields)
        if isinstance(value, str):
            return personal or self._holds_value(value)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and (personal or str(value) in self.values)


# Another app's part: given the erasure (its workspace) and the eraser, it erases the values from its rows.
ErasurePart = Callable[[Erasure, Eraser], None]
_parts: list[ErasurePart] = []


def erasure_part_register(part: ErasurePart) -> None:
    """Run `part` in every erasure, after the handoffs' (once, however often registered)."""
    if part not in _parts:
        _parts.append(part)


def erasure_parts_run(*, erasure: Erasure, eraser: Eraser) -> None:
    for part in _parts:
        part(erasure, eraser)


def handoffs_refusing_erasure(source_ids: Iterable[int], workflows: Iterable[str]) -> list[str]:
    """The action keys of the requests' handoffs that may still be sent (pending or in flight). A source id
    names a request revision only within its request's workflows (a notification's names its incident)."""
    return list(
        Handoff.objects.using(DB)
        .filter(
            source_id__in=list(source_ids), workflow__in=list(workflows), state__in=SENDABLE_STATES
        )
        .order_by("action_key")
        .values_list("action_key", flat=True)
    )


def still_sendable(action_keys: Iterable[str]) -> str:
    """Why handoffs that may still be sent refuse an erasure, in the words of both checks (the one before,
    which lists every refusal, and the one under the rows' locks)."""
    return f"{', '.join(action_keys)}: may still be sent; let it settle or cancel it first"


def handoffs_erase(
    *, erasure: Erasure, source_ids: Iterable[int], workflows: Iterable[str], eraser: Eraser
) -> Counter:
    """Erase the subject's values from the handoffs of these request revisions (their payload, the request
    frozen in them, their plan of later steps, their ordering key, their search text, last error, attempts,
    events, status events, their cases' holds) and from their archived rows, each marked with `erasure`.
    Raises ErasureRefused while one may still be sent. Returns the rows changed by kind. Runs inside the
    caller's transaction when there is one."""
    ids, workflows = list(source_ids), list(workflows)
    with transaction.atomic(using=DB):
        # Locked in id order, as every write of several handoffs locks them.
        handoffs = list(
            Handoff.objects.using(DB)
            .select_for_update(no_key=True)
            .filter(source_id__in=ids, workflow__in=workflows, workspace_id=erasure.workspace_id)
            .order_by("id")
        )
        sendable = sorted(h.action_key for h in handoffs if h.state in SENDABLE_STATES)
        if sendable:
            raise ErasureRefused(still_sendable(sendable))
        counts = Counter()
        for handoff in handoffs:
            _erase_handoff(handoff, erasure, eraser)
            counts["handoffs"] += 1
        hot = [h.pk for h in handoffs]
        counts["attempts"] = text_fields_erase(
            Attempt.objects.using(DB).filter(handoff_id__in=hot), eraser, {"detail": None}
        )
        counts["handoff_events"] = text_fields_erase(
            HandoffEvent.objects.using(DB).filter(handoff_id__in=hot), eraser, {"reason": None}
        )
        counts["status_events"] = _erase_status_events(handoffs, eraser)
        counts["case_holds"] = _erase_case_holds(handoffs, eraser)
        counts["archived_handoffs"] = _erase_archived(erasure, ids, workflows, eraser)
    return counts


def _erased_order_key(order_key: str, erasure: Erasure, eraser: Eraser) -> str:
    """An ordering key is a payload value (`outbox/steps.py`, "order_by"): one that holds the subject's
    becomes the erasure's own, so that the subject's steps keep their order among themselves and share
    no key with another subject's."""
    if not order_key or eraser.document(order_key) == order_key:
        return order_key
    return f"{ERASED}:{erasure.pk}"


def _erased_plan(plan: list, erasure: Erasure, eraser: Eraser) -> list:
    """The later steps a step's row carries: each one's frozen request and ordering key erased; its key,
    step, operation and destination kept (it is still recorded by them, as the key is kept)."""
    erased = []
    for entry in plan:
        entry = dict(entry)
        if entry.get("request") is not None:
            entry["request"] = eraser.document(entry["request"])
        if entry.get("order_key"):
            entry["order_key"] = _erased_order_key(entry["order_key"], erasure, eraser)
        erased.append(entry)
    return erased


def _erase_handoff(handoff: Handoff, erasure: Erasure, eraser: Eraser) -> None:
    handoff.payload = eraser.document(handoff.payload)
    if handoff.request is not None:
        handoff.request = eraser.document(handoff.request)
    handoff.plan = _erased_plan(handoff.plan or [], erasure, eraser)
    handoff.order_key = _erased_order_key(handoff.order_key, erasure, eraser)
    handoff.search_text = eraser.text(handoff.search_text or "") or None
    handoff.last_error = eraser.text(handoff.last_error)
    handoff.erasure = erasure
    # updated_at is left as it was: the erasure is not a move of the handoff, and the page clock of a
    # settled handoff (its settled time) must not change.
    Handoff.objects.using(DB).filter(pk=handoff.pk).update(
        payload=handoff.payload,
        request=handoff.request,
        plan=handoff.plan,
        order_key=handoff.order_key,
        search_text=handoff.search_text,
        last_error=handoff.last_error,
        erasure=erasure,
    )


def text_fields_erase(rows: QuerySet, eraser: Eraser, widths: dict[str, int | None]) -> int:
    """The subject's values erased from these text fields of the rows (each cut to its width, None: as
    long as it is); how many rows changed."""
    changed = 0
    for row in rows.only(*widths):
        before = {field: getattr(row, field) for field in widths}
        erased = {field: eraser.text(text)[: widths[field]] for field, text in before.items()}
        if erased != before:
            rows.model.objects.using(DB).filter(pk=row.pk).update(**erased)
            changed += 1
    return changed


def _erase_status_events(handoffs: list[Handoff], eraser: Eraser) -> int:
    """The status events destinations sent about these handoffs (found by handoff, or by key when the event
    was recorded before the handoff was known): the text a destination chose, its task id and status, may
    quote the subject (a CRM whose contact id is the e-mail)."""
    about = Q(handoff_id__in=[h.pk for h in handoffs]) | Q(
        action_key__in=[h.action_key for h in handoffs]
    )
    events = StatusEvent.objects.using(DB).filter(about)
    return text_fields_erase(events, eraser, {"task_id": 120, "status": 16})


def _erase_case_holds(handoffs: list[Handoff], eraser: Eraser) -> int:
    """Operators' holds of these handoffs' cases (`outbox/models/case_holds.py`), live or ended: the reason
    an operator typed ("calling <the client>") and the end's, shown on the handoff page and the list while
    the hold lives, are free text like an event's."""
    about = (
        Q(handoff_id__in=[h.pk for h in handoffs])
        | Q(pk__in=[h.case_hold_id for h in handoffs if h.case_hold_id])
        | Q(instance_key__in=[h.instance_key for h in handoffs if h.instance_key])
    )
    holds = CaseHold.objects.using(DB).filter(about)
    return text_fields_erase(holds, eraser, {"reason": 200, "end_reason": 200})


def _erase_archived(
    erasure: Erasure, source_ids: list[int], workflows: list[str], eraser: Eraser
) -> int:
    rows = ArchivedHandoff.objects.using(DB).filter(
        source_id__in=source_ids, workflow__in=workflows, workspace_id=erasure.workspace_id
    )
    changed = 0
    for row in rows.only("request", "history", "search_text"):
        ArchivedHandoff.objects.using(DB).filter(pk=row.pk).update(
            request=None if row.request is None else eraser.document(row.request),
            history=_erased_history(row.history, eraser),
            search_text=eraser.text(row.search_text or "") or None,
            erasure=erasure,
        )
        changed += 1
    return changed


def _erased_history(history: object, eraser: Eraser) -> object:
    """An archived handoff's attempts and events: their free text erased, like the hot rows'."""
    if isinstance(history, dict):
        return {k: _erased_history(v, eraser) for k, v in history.items()}
    if isinstance(history, list):
        return [_erased_history(v, eraser) for v in history]
    return eraser.text(history) if isinstance(history, str) else history
