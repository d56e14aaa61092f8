"""Pulled work status: for each destination whose `work_status` is pulled, read the work of its delivered
handoffs that is not final yet (neither done nor failed), oldest delivery first, at most `limit` a run, each
no sooner than `every_seconds` after its last read, through the destination's limits (a permit per read, as
a lookup). docs/destinations.md "Work status".

What a read learns is recorded by the status-event service (`handoff_record_status_event`), as a statement
marked as a read, so the history, the screens and the requester's lines read a pulled status as they read a
pushed one:
- a configured value: done, failed or open, recorded when it differs from the stored one;
- any other value: unknown, recorded with the value as answered (once per value), never guessed;
- 404 or 410: the destination has no such task any more, recorded as a status event "task deleted" is (the
  requester's line says the work is unknown and an operator checks; reconciliation's key checks find it
  missing). No more reads of it.
A read that fails (unreachable, refused credentials, no permit) records nothing and stops that destination's
run: the handoff is read again at the next run.
"""

import hashlib
import logging
from dataclasses import dataclass, field

from django.db.models import Q

from lib.databases import DB
from outbox.clock import db_now, db_now_plus, db_time
from outbox.destinations import Destination, LookupFailed, enabled_destinations
from outbox.destinations.base import WorkAnswer
from outbox.dispatch.wakeups import wake_work_pull_in
from outbox.models import Handoff, HandoffKind, HandoffState
from outbox.models.states import WORK_DONE, WORK_FAILED
from outbox.services.lookup_limits import LimitedLookups
from outbox.services.status_events import (
    STATUS_CHANGED,
    TASK_DELETED,
    ReceiverStatement,
    handoff_record_status_event,
)

log = logging.getLogger(__name__)
WORKER = "work status pull"
PULL_LIMIT = 100
SHOWN_VALUE_CHARS = 80
FINAL = (WORK_DONE, WORK_FAILED)


@dataclass
class PullRun:
    """What one run read and recorded, by destination name where it failed."""

    read: int = 0
    recorded: int = 0
    unknown: int = 0
    gone: int = 0
    failed: dict[str, str] = field(default_factory=dict)


def pull_due(destination: Destination, *, limit: int) -> list[Handoff]:
    """The destination's delivered steps whose work is not final, not read in the last `every_seconds`,
    oldest delivery first."""
    every = destination.work_status.every_seconds
    return list(
        Handoff.objects.using(DB)
        .filter(destination=destination.name, state=HandoffState.DELIVERED, kind=HandoffKind.ACTION)
        .filter(compensation_state="")
        .exclude(work_status__in=FINAL)
        .exclude(task_seen=False)
        .filter(Q(work_checked_at__isnull=True) | Q(work_checked_at__lte=db_now_plus(-every)))
        .order_by("delivered_at", "id")[:limit]
    )


def handoffs_pull_work_status(*, limit: int = PULL_LIMIT) -> PullRun:
    """One run over every enabled destination whose work status is pulled."""
    run = PullRun()
    for destination in enabled_destinations():
        if destination.work_status.pulled:
            _pull_destination(destination, run, limit=limit)
    return run


def _pull_destination(destination: Destination, run: PullRun, *, limit: int) -> None:
    due = pull_due(destination, limit=limit)
    _read_each(destination, due, run)
    if any(h.task_seen is not False and h.work_status not in FINAL for h in due):
        # Work still open (or unknown) is read again `every_seconds` from now, not at the next minute.
        wake_work_pull_in(destination.work_status.every_seconds)


def _read_each(destination: Destination, due: list[Handoff], run: PullRun) -> None:
    asking = LimitedLookups(destination, worker=WORKER)
    for handoff in due:
        try:
            answer = asking.read_work(
                receipt_id=handoff.destination_id or "", action_key=handoff.action_key
            )
        except LookupFailed as exc:
            # Unreachable, refused, or no permit now: nothing is known; the next run asks again.
            log.warning("work status of %s not read: %s", destination.name, exc)
            run.failed[destination.name] = str(exc)
            return
        run.read += 1
        _record(destination, handoff, answer, run)
        handoff.refresh_from_db(fields=["work_status", "task_seen"])


def _value_words(value: object) -> str:
    shown = repr(value) if isinstance(value, str) else str(value)
    return shown if len(shown) <= SHOWN_VALUE_CHARS else f"{shown[:SHOWN_VALUE_CHARS]}…"


def _record(destination: Destination, handoff: Handoff, answer: WorkAnswer, run: PullRun) -> None:
    source = destination.work_status
    meaning = source.meaning(answer.value) if answer.found else ""
    if answer.found and meaning and meaning == handoff.work_status:
        # Nothing new: only when it was read, so that it is read again `every_seconds` later.
        Handoff.objects.using(DB).filter(pk=handoff.pk).update(work_checked_at=db_now())
        return
    now = db_time()
    if not answer.found:
        kind, words, webhook_id = TASK_DELETED, answer.asked, f"pull:{handoff.pk}:gone"
        run.gone += 1
    else:
        kind, words = (
            STATUS_CHANGED,
            f"{answer.asked}: {source.value_at} {_value_words(answer.value)}",
        )
        # The same unknown value over the same stored status is one record; a known change is one per read.
        seen = f"{_value_words(answer.value)}|{handoff.work_status}".encode()
        webhook_id = (
            f"pull:{handoff.pk}:{int(now.timestamp() * 1000)}"
            if meaning
            else f"pull:{handoff.pk}:unknown:{hashlib.sha256(seen).hexdigest()[:24]}"
        )
        run.unknown += not meaning
    outcome = handoff_record_status_event(
        destination=destination.name,
        webhook_id=webhook_id,
        statement=ReceiverStatement(
            kind=kind,
            action_key=handoff.action_key,
            task_id=handoff.destination_id or "",
            status=meaning,
            # The database clock, in milliseconds: a later read is a higher number, on any host.
            sequence=int(now.timestamp() * 1000),
            occurred_at=now,
            read=words,
        ),
    )
    if outcome.repeated:
        Handoff.objects.using(DB).filter(pk=handoff.pk).update(work_checked_at=db_now())
    else:
        run.recorded += 1
