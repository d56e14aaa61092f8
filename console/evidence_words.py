"""The evidence words, in one place: how a step's outcome is known, whether its task exists at the receiver now,
what is known of the work, and who owns the next step. Chosen from the evidence recorded, never from the
state alone: a handoff is "delivered" by a validated receipt, by a lookup of its key, or by a person's manual
repair, and each says which; a receiver's later word that the task is gone beats the delivery it followed;
a repair recorded after a failure report says the work was finished by hand.

Pure: the handoff, its live findings and its manual repairs are read beforehand (the handoff page reads
them anyway; `console/request_evidence.py` reads the repairs of a page of requests in one query). The
requester's lines (`console/step_status.py`) and the handoff page both call these functions, so one step
reads the same on every screen."""

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils.encoding import force_str

from outbox.models import Handoff, HandoffState
from outbox.models.states import WORK_DONE, WORK_FAILED, WORK_UNFINISHED
from reconciliation.models import FindingKind

S = HandoffState

# Who owns the next step: the dispatcher and its settlement pass, or the people doing the task.
SYSTEM = "the system (it retries and checks by itself)"
WORKERS = "the people doing the task at the receiver"

FOUND_BY_LOOKUP = "found by lookup"
RECEIPT_VALIDATED = "receipt validated"
SETTLED_BY_PERSON = "settled by a person"
NOT_RECORDED = "how it was learnt is not recorded"


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else "an unknown time"


def _settling_repair(handoff: Handoff, repairs: Iterable) -> object | None:
    """The manual repair that named the task the handoff holds now (it settled the outcome by hand)."""
    named = [
        r
        for r in repairs
        if r.receiver_task_id
        and r.receiver_task_id == handoff.destination_id
        and r.resulting_state == S.DELIVERED
    ]
    return named[-1] if named else None


# The kinds of outcome evidence (the claim `handoff.outcome_evidence`, docs/console.md) and their words.
REPAIR, LOOKUP, RECEIPT, UNRECORDED = "repair", "lookup", "receipt", "unrecorded"
OUTCOME_WORDS = {LOOKUP: FOUND_BY_LOOKUP, RECEIPT: RECEIPT_VALIDATED, UNRECORDED: NOT_RECORDED}


def outcome_evidence(handoff: Handoff, repairs: Iterable = ()) -> str:
    """The kind of evidence the outcome is known by: a person's repair naming the task, a lookup of the key
    (after a lost or malformed answer), the receipt the receiver answered with, or nothing recorded."""
    if _settling_repair(handoff, list(repairs)) is not None:
        return REPAIR
    receipt = handoff.receipt or {}
    if receipt.get("found_by") == "lookup":
        return LOOKUP
    return RECEIPT if receipt else UNRECORDED


def outcome_known(handoff: Handoff, repairs: Iterable = ()) -> str:
    """How the receiver's task is known, in the words the screens use (`outcome_evidence` chooses)."""
    repairs = list(repairs)
    kind = outcome_evidence(handoff, repairs)
    if kind == REPAIR:
        repair = _settling_repair(handoff, repairs)
        return f"{SETTLED_BY_PERSON} ({repair.actor_label}'s manual repair at {_when(repair.at)})"
    return OUTCOME_WORDS[kind]


@dataclass(frozen=True)
class TaskNow:
    """The newest word about the task at the receiver: there or not, said by whom, when; `accounted`: a
    manual repair recorded after it accounts for it (nothing is left for a person to do)."""

    found: bool
    by: str
    at: datetime | None
    accounted: object | None = None


def _statements(handoff: Handoff, findings: Iterable, repairs: list) -> list[tuple]:
    said = [(True, outcome_known(handoff, repairs), handoff.delivered_at)]
    if handoff.task_checked_at and handoff.task_seen is not None:
        said.append((handoff.task_seen, handoff.task_checked_by, handoff.task_checked_at))
    said += [
        (False, "reconciliation", f.last_seen_at)
        for f in findings
        if f.kind == FindingKind.MISSING_AT_RECEIVER
    ]
    said += [
        (True, f"{r.actor_label} (manual repair)", r.at)
        for r in repairs
        if r.receiver_task_id and r.receiver_task_id == handoff.destination_id
    ]
    return said


def task_now(handoff: Handoff, findings: Iterable = (), repairs: Iterable = ()) -> TaskNow | None:
    """Whether the delivered step's task exists at the receiver now: the delivery, a later check or status
    event ("task deleted"), a reconciliation finding that misses it, and a person's repair naming the task
    (re-created). The newest statement wins. None when nothing was delivered."""
    if handoff.state != S.DELIVERED:
        return None
    repairs = list(repairs)
    said = [s for s in _statements(handoff, findings, repairs) if s[2] is not None]
    if not said:
        return TaskNow(True, outcome_known(handoff, repairs), None)
    found, by, at = max(said, key=lambda s: s[2])
    accounted = None
    if not found:
        accounted = next((r for r in reversed(repairs) if r.at and r.at >= at), None)
    return TaskNow(found, by or "the receiver", at, accounted)


def work_by_hand(handoff: Handoff, repairs: Iterable = ()) -> object | None:
    """The manual repair recorded after the receiver reported the work failed (or that closed a "work
    failed" finding): a person finished or accounted for the work by hand."""
    if handoff.state != S.DELIVERED or handoff.work_status == WORK_DONE:
        return None
    after = [r for r in repairs if _covers_work(handoff, r) and _after_report(handoff, r)]
    return after[-1] if after else None


def _after_report(handoff: Handoff, repair) -> bool:
    reported = handoff.work_reported_at or handoff.work_checked_at or handoff.delivered_at
    return reported is None or repair.at >= reported


def _covers_work(handoff: Handoff, repair) -> bool:
    """A repair of a "work failed" finding, or one recorded on a handoff whose work the receiver reports failed."""
    if repair.covered_kind:
        return repair.covered_kind == FindingKind.WORK_FAILED
    return handoff.work_status == WORK_FAILED


def work_known(handoff: Handoff, repairs: Iterable = ()) -> str:
    """The kind of what is known of the work (the claim `handoff.work`): `na` (not delivered), `by_delivery`,
    `done` (reported), `by_hand` (a repair after a failure), `failed`, `unfinished`, `unreported`."""
    if handoff.state != S.DELIVERED:
        return "na"
    if handoff.work_done_by_delivery:
        return "by_delivery"
    if handoff.work_status == WORK_DONE:
        return "done"
    if work_by_hand(handoff, repairs) is not None:
        return "by_hand"
    if handoff.work_status == WORK_FAILED:
        return "failed"
    return "unfinished" if handoff.work_status in WORK_UNFINISHED else "unreported"


_WORK_WORDS = {
    "na": "—",
    "by_delivery": "yes (delivering it was the work)",
    "done": "yes (the receiver reports it done)",
    "failed": "no (the receiver reports it failed)",
    "unreported": "not reported yet",
}


def work_words(handoff: Handoff, repairs: Iterable = ()) -> str:
    """The work, as far as it is known, in words (`work_known` chooses)."""
    repairs = list(repairs)
    kind = work_known(handoff, repairs)
    if kind == "by_hand":
        repair = work_by_hand(handoff, repairs)
        return (
            f"finished by hand ({repair.actor_label}'s manual repair at {_when(repair.at)}: "
            f"{repair.what_was_done})"
        )
    if kind == "unfinished":
        return f"not yet ({handoff.work_status.replace('_', ' ')})"
    return _WORK_WORDS[kind]


def task_words_now(handoff: Handoff, findings: Iterable = (), repairs: Iterable = ()) -> str:
    """ "task created" as the handoff page's summary says it: with how it is known and whether it is still
    there."""
    if handoff.state != S.DELIVERED:
        return "not yet" if handoff.is_open else "no"
    repairs = list(repairs)
    made = f"yes, {outcome_known(handoff, repairs)} ({handoff.destination_id})"
    now = task_now(handoff, findings, repairs)
    if now is not None and not now.found:
        return f"{made}; not at the receiver now ({now.by}, {_when(now.at)}): deleted there?"
    return made


def last_step_words(handoff: Handoff, repairs: Iterable = ()) -> str | None:
    """The "last successful step" of a delivered handoff, in the words of how it was learnt; None otherwise
    (the caller words the send)."""
    if handoff.state != S.DELIVERED:
        return None
    how = outcome_known(handoff, repairs)
    return f"{how} at {_when(handoff.delivered_at)}: task {handoff.destination_id}"


def state_badge(handoff: Handoff) -> tuple[str, str]:
    """The state as the lists and page tops show it (class, words): a delivered handoff whose task the
    receiver said it no longer has (a "task deleted" event, a check) is not a green "Delivered"."""
    there = task_now(handoff)
    if there is not None and not there.found:
        return "task_gone", "Delivered, task gone at the receiver"
    return handoff.state, choice_words(handoff, "state")


@functools.cache
def _choices(field: str) -> dict:
    return dict(Handoff._meta.get_field(field).flatchoices)


def choice_words(handoff: Handoff, field: str) -> str:
    """`handoff.get_<field>_display()` from the field's choices read once: Django makes their dict again at
    each call, two a list row (a twentieth of a list page's CPU: issue 40)."""
    value = getattr(handoff, field)
    return force_str(_choices(field).get(value, value), strings_only=True)


def work_cell(handoff: Handoff) -> str:
    """The work in a list of steps: not "open" for a task the receiver no longer has."""
    there = task_now(handoff)
    if there is not None and not there.found:
        return WORK_OF_A_GONE_TASK
    return handoff.work_status or "—"


WORK_OF_A_GONE_TASK = "unknown (task gone)"
