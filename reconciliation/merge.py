"""The merge: both key sets streamed in action-key order, one page at a time, compared in one pass.

The source side pages through the outbox by keyset on `action_key` (the unique index); the receiver side
pages through the destination's `list_keys`, over HTTP one request ahead of the merge. At most one page
of the source and two of the receiver are held, so memory does not grow with the table. The source side
includes the archive (settled handoffs that retention moved out of the outbox,
`outbox.models.ArchivedHandoff`), merged in key order: an archived key the receiver lists is the
source's, not an orphan, and an archived delivered key the receiver lost is still missing. Both sides
must list keys in code-point order (C / binary collation, the default for SQLite and for a PostgreSQL
database created with C or C.UTF-8); a stream that goes backwards stops the run instead of producing
false findings.
"""

import heapq
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from itertools import chain, takewhile
from operator import attrgetter, lt
from typing import NamedTuple

from django.db.models import BooleanField, ExpressionWrapper, Q, Value

from lib.databases import DB
from outbox.destinations import Destination, HttpDestination, RemoteTask
from outbox.models import OPEN_STATES, ArchivedHandoff, Handoff, HandoffState
from outbox.models.states import WORK_FAILED, WORK_UNFINISHED

SOURCE_FIELDS = (
    "action_key",
    "id",
    "state",
    "payload_hash",
    "destination_id",
    "workflow",
    "workspace_id",
    "source_ref",
    "created_at",
    "updated_at",
    "next_attempt_at",
    "sla_due_at",
    "delivered_at",
    "attempts",
    "failure_class",
    "reason_code",
    "work_status",
)

# The business outcome as the receiver reports a task's status (`outbox.models.states`): unfinished work past
# the deadline and failed work are findings; done closes them.


@dataclass(frozen=True)
class SourceRow:
    action_key: str
    id: int
    state: str
    payload_hash: str
    destination_id: str
    workflow: str
    workspace_id: int
    source_ref: str
    created_at: datetime
    updated_at: datetime
    next_attempt_at: datetime | None
    sla_due_at: datetime | None
    delivered_at: datetime | None
    attempts: int
    failure_class: str
    reason_code: str
    work_status: str


class SourceKey(NamedTuple):
    """What the merge needs of one handoff: small, so that a page of them is cheap to fetch and hold.
    The full row (SourceRow) is read again only for a key that has a problem. A named tuple, not a
    dataclass: a run builds one per key, straight from the query's row (`SourceKey._make`)."""

    action_key: str
    id: int
    state: str
    payload_hash: str
    destination_id: str
    stuck: bool
    work_status: str
    # Delivered before the work deadline: unfinished work at the receiver is then a finding.
    work_late: bool
    # Read from the archive: the handoff left the outbox, settled, after the retention period.
    archived: bool = False


# A query's row (every field, in order) as a SourceKey, without a Python call per key (`SourceKey._make` is one).
_source_key = partial(tuple.__new__, SourceKey)


def stuck_condition(*, now: datetime, stuck_before: datetime) -> Q:
    """Open too long: past the SLA, due but unclaimed, or in flight / uncertain since `stuck_before`."""
    S = HandoffState
    return (
        Q(state__in=OPEN_STATES, sla_due_at__lt=now)
        | Q(state=S.PENDING, next_attempt_at__lt=stuck_before)
        | Q(state=S.PENDING, next_attempt_at__isnull=True, created_at__lt=stuck_before)
        | Q(state__in=(S.IN_FLIGHT, S.UNCERTAIN), updated_at__lt=stuck_before)
    )


def work_late_condition(*, work_before: datetime) -> Q:
    """Delivered before `work_before` (now minus the work deadline, on the clock that wrote delivered_at)."""
    return Q(state=HandoffState.DELIVERED, delivered_at__lt=work_before)


def reports_work(state: str, payload_hash: str, task: RemoteTask | None) -> bool:
    """Whether the receiver's task speaks for this handoff's work: delivered, same content, a status reported."""
    return (
        task is not None
        and bool(task.status)
        and state == HandoffState.DELIVERED
        and task.payload_hash == payload_hash
    )


def work_problem(task: RemoteTask, *, work_late: bool) -> bool:
    """Failed work, or work still unfinished past the deadline (for a task that `reports_work`)."""
    return task.status == WORK_FAILED or (task.status in WORK_UNFINISHED and work_late)


@dataclass
class StreamStats:
    """What a stream did: pages fetched, rows seen, the largest page held, and every page size asked for."""

    pages: int = 0
    rows: int = 0
    largest_page: int = 0
    limits_requested: frozenset[int] = frozenset()

    def page(self, limit: int, rows: int) -> None:
        self.pages += 1
        self.rows += rows
        self.largest_page = max(self.largest_page, rows)
        self.limits_requested = self.limits_requested | {limit}


class KeyOrderError(Exception):
    """A stream listed keys out of code-point order: a merge would report false findings."""


# The archive's columns in the order of SOURCE_FIELDS (what it does not keep is what a settled row has not).
ARCHIVE_FIELDS = {
    "id": "handoff_id",
    "state": "final_state",
    "destination_id": "task_id",
    "updated_at": "settled_at",
}
_NOT_KEPT = {"next_attempt_at": None, "sla_due_at": None, "failure_class": "", "reason_code": ""}


def source_row(action_key: str) -> SourceRow | None:
    """The handoff of this key as the outbox holds it, else as the archive kept it, else None."""
    row = (
        Handoff.objects.using(DB).filter(action_key=action_key).values_list(*SOURCE_FIELDS).first()
    )
    if row:
        return SourceRow(*row)
    kept = [ARCHIVE_FIELDS.get(f, f) for f in SOURCE_FIELDS if f not in _NOT_KEPT]
    archived = ArchivedHandoff.objects.using(DB).filter(action_key=action_key).values(*kept).first()
    if archived is None:
        return None
    return SourceRow(
        **{
            f: _NOT_KEPT[f] if f in _NOT_KEPT else archived[ARCHIVE_FIELDS.get(f, f)]
            for f in SOURCE_FIELDS
        }
    )


def archive_stream(
    *,
    batch_size: int,
    stats: StreamStats,
    work_before: datetime,
    workspace_id: int | None = None,
    destination_name: str | None = None,
) -> Iterator[SourceKey]:
    """Every archived handoff in action-key order, `batch_size` rows per query (keyset on its unique key)."""
    rows = ArchivedHandoff.objects.using(DB)
    if destination_name is not None:
        rows = rows.filter(destination=destination_name)
    if workspace_id is not None:
        rows = rows.filter(workspace_id=workspace_id)
    rows = rows.order_by("action_key").values_list(
        "action_key",
        "handoff_id",
        "final_state",
        "payload_hash",
        "task_id",
        "work_status",
        "delivered_at",
    )
    for page in keyset_pages(rows, batch_size):
        # Its keys are the source's (the run's source count includes them); its pages are not the outbox's.
        stats.rows += len(page)
        for key, pk, state, payload_hash, task_id, work_status, delivered_at in page:
            late = (
                state == HandoffState.DELIVERED
                and delivered_at is not None
                and delivered_at < work_before
            )
            yield SourceKey(key, pk, state, payload_hash, task_id, False, work_status, late, True)


def keyset_pages(rows, batch_size: int) -> Iterator[list[tuple]]:
    """`rows` (values ordered by action key, the key first) `batch_size` at a time, keyset-paged: no OFFSET,
    no long cursor. The last page is the first one shorter than `batch_size` (possibly empty)."""
    after = ""
    while True:
        page = list(rows.filter(action_key__gt=after)[:batch_size])
        check_key_order("source", after, [row[0] for row in page])
        yield page
        if len(page) < batch_size:
            return
        after = page[-1][0]


def source_stream(
    *,
    batch_size: int,
    stats: StreamStats,
    now: datetime,
    stuck_before: datetime,
    work_before: datetime,
    workspace_id: int | None = None,
    destination_name: str | None = None,
) -> Iterator[SourceKey]:
    """The outbox's handoffs and the archive's, merged in action-key order. A key is in one of them, but
    retention may move it between the two reads: seen in both, it is yielded once (the outbox's first); moved
    the other way round, missed by both, a receiver's task for it is confirmed against `source_row`, which
    reads the archive too."""
    scope = {"workspace_id": workspace_id, "destination_name": destination_name}
    previous = None
    for row in _merged(now, stuck_before, work_before, batch_size, stats, scope):
        if row.action_key != previous:
            yield row
        previous = row.action_key


def _merged(now, stuck_before, work_before, batch_size, stats, scope) -> Iterator[SourceKey]:
    return heapq.merge(
        outbox_stream(
            batch_size=batch_size,
            stats=stats,
            now=now,
            stuck_before=stuck_before,
            work_before=work_before,
            **scope,
        ),
        archive_stream(batch_size=batch_size, stats=stats, work_before=work_before, **scope),
        key=attrgetter("action_key"),
    )


def outbox_stream(
    *,
    batch_size: int,
    stats: StreamStats,
    now: datetime,
    stuck_before: datetime,
    work_before: datetime,
    workspace_id: int | None = None,
    destination_name: str | None = None,
) -> Iterator[SourceKey]:
    """Every handoff in action-key order, `batch_size` rows per query (keyset: no OFFSET, no long cursor):
    those sent to `destination_name` when one is given, since a destination's listing holds only its own."""
    handoffs = Handoff.objects.using(DB)
    if destination_name is not None:
        handoffs = handoffs.filter(destination=destination_name)
    if workspace_id is not None:
        handoffs = handoffs.filter(workspace_id=workspace_id)
    rows = (
        handoffs.annotate(
            is_stuck=ExpressionWrapper(
                stuck_condition(now=now, stuck_before=stuck_before), output_field=BooleanField()
            ),
            is_work_late=ExpressionWrapper(
                work_late_condition(work_before=work_before), output_field=BooleanField()
            ),
            # SourceKey.archived, in the row itself: a page becomes SourceKeys without a Python loop.
            not_archived=Value(False, output_field=BooleanField()),
        )
        .order_by("action_key")
        .values_list(
            "action_key",
            "id",
            "state",
            "payload_hash",
            "destination_id",
            "is_stuck",
            "work_status",
            "is_work_late",
            "not_archived",
        )
    )
    for page in keyset_pages(rows, batch_size):
        stats.page(batch_size, len(page))
        yield from map(_source_key, page)


def receiver_stream(
    destination: Destination, *, batch_size: int, stats: StreamStats, prefix: str = ""
) -> Iterator[RemoteTask]:
    """Every task at the receiver (or those whose key starts with `prefix`), through the destination
    interface only, one page at a time."""
    after = prefix
    pages = _pages_read_ahead(destination, after, batch_size)
    while True:
        page = next(pages)
        stats.page(batch_size, len(page))
        # Only an empty page ends the listing: a receiver may cap the page size below what was asked
        # (the HTTP API caps it at 5,000), and a short page taken for the last would hide the rest.
        if not page:
            return
        check_key_order("receiver", after, [task.action_key for task in page])
        if page[-1].action_key.startswith(prefix):
            # Keys come in code-point order: when the last has the prefix, so has every key before it.
            yield from page
        else:
            # The first key without the prefix ends its range.
            yield from takewhile(lambda task: task.action_key.startswith(prefix), page)
            return
        after = page[-1].action_key


def _pages_read_ahead(
    destination: Destination, after: str, limit: int
) -> Iterator[list[RemoteTask]]:
    """The receiver's pages in turn, each asked for while the one before is merged: over HTTP the receiver
    builds the next page (its query and JSON) on the other core instead of the merge waiting for it. One
    request ahead at most; a failure is raised where its page is taken. In-process listings are read in
    the merge's own thread (they use its database connection and transaction)."""
    if not isinstance(destination, HttpDestination):
        while True:
            page = destination.list_keys(after=after, limit=limit)
            yield page
            after = page[-1].action_key if page else after
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="receiver-listing") as ahead:
        asked = ahead.submit(destination.list_keys, after=after, limit=limit)
        try:
            while True:
                page = asked.result()
                if page:
                    asked = ahead.submit(
                        destination.list_keys, after=page[-1].action_key, limit=limit
                    )
                yield page
        finally:
            asked.cancel()


def workspace_prefixes(workflows: Iterable[str], workspace_id: int) -> list[str]:
    """Key prefixes of one workspace, `<workflow>:<workspace>:`, in code-point order.

    No workflow name holds a colon, so no prefix is the start of another: the ranges they select
    follow each other in the same order, and their concatenation is still in key order.
    """
    return sorted(f"{workflow}:{workspace_id}:" for workflow in set(workflows))


def receiver_stream_of_workspace(
    destination: Destination, *, batch_size: int, stats: StreamStats, prefixes: list[str]
) -> Iterator[RemoteTask]:
    for prefix in prefixes:
        yield from receiver_stream(destination, batch_size=batch_size, stats=stats, prefix=prefix)


def check_key_order(side: str, after: str, keys: list[str]) -> None:
    """KeyOrderError unless a page's keys rise strictly in code-point order from `after` (the key the page
    was asked to follow). Checked a page at a time, in C (`map(lt, ...)`), not key by key in Python."""
    if not keys or (after < keys[0] and all(map(lt, keys, keys[1:]))):
        return
    previous, item = next((a, b) for a, b in zip([after, *keys], keys, strict=False) if not a < b)
    raise KeyOrderError(
        f"the {side} listed {item!r} after {previous!r}: keys must come in code-point order "
        "(use a C collation for the action key)"
    )


def merge_streams(
    source: Iterator[SourceKey], receiver: Iterator[RemoteTask]
) -> Iterator[tuple[str, SourceKey | None, RemoteTask | None]]:
    """Merge two key-ordered streams: (key, source row or None, receiver task or None) per distinct key.
    Both streams check their order a page at a time (`check_key_order`) as they are read."""
    source, receiver = iter(source), iter(receiver)
    s, r = next(source, None), next(receiver, None)
    # Both sides present: the loop every key of a run takes (most keys are on both sides).
    while s is not None and r is not None:
        if s.action_key == r.action_key:
            yield s.action_key, s, r
            s, r = next(source, None), next(receiver, None)
        elif s.action_key < r.action_key:
            yield s.action_key, s, None
            s = next(source, None)
        else:
            yield r.action_key, None, r
            r = next(receiver, None)
    # One side is done: the rest of the other is its own (streamed on, never held).
    if s is not None:
        for rest in chain((s,), source):
            yield rest.action_key, rest, None
    if r is not None:
        for rest in chain((r,), receiver):
            yield rest.action_key, None, rest
