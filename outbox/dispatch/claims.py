"""The dispatcher's claim: due handoffs leased to one worker, an attempt opened and the claim event written
for each, all or nothing.

A claim and its outcome are two short transactions with the network call between them. A claim carries a
fencing token (lease owner + epoch); an outcome whose token no longer matches is refused
(`outbox/services/outcomes.py`).
"""

from dataclasses import dataclass
from datetime import datetime
from time import time_ns
from typing import NamedTuple

from django.conf import settings
from django.db import connections, transaction
from django.db.models import BooleanField, F
from django.db.models.expressions import RawSQL

from lib.databases import DB, compiled_once, prepared_cursor
from lib.request_mapping import sent_body
from lib.telemetry import past_spans
from outbox.clock import POSTGRES_NOW_PLUS, db_now, db_now_plus
from outbox.destinations import Destination
from outbox.destinations.registry import destination_row_statement
from outbox.failover import timeline_check
from outbox.failures import DeliveryResult, Outgoing, UndoTarget
from outbox.models import (
    Attempt,
    AttemptOutcome,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffState,
)
from outbox.services.limits import LIMITS_COLUMNS, limits_statement

S = HandoffState


@dataclass(frozen=True)
class Claim:
    handoff_id: int
    action_key: str
    payload: dict
    payload_hash: str
    attempt_number: int
    worker: str
    epoch: int
    attempt_id: int | None = None
    # The attempt's number within its run (the handoff was recorded, retried or settled by a person since).
    run_attempt: int = 1
    # Its delivery records more than itself (a workflow's next step, or marks the step a compensation
    # reversed): its outcome is written on the locked path, which reads the row. True unless the claim said.
    follow_up: bool = True
    # Its workspace, for the log lines written about it (`lib/log_context.py`).
    workspace_id: int | None = None
    # A compensation's: the delivered step it reverses, read by the claim itself (`ClaimedRow`).
    undo: UndoTarget | None = None
    # The request frozen in the handoff at approval (`Handoff.request`); None: the payload is the body.
    request: dict | None = None
    # Its lease's end on the database clock, as the claim set it: the batch's calls state the database's time
    # from it (`outbox/clock.py` `calls_on_db_clock`), no query of their own.
    leased_until: datetime | None = None

    @property
    def outgoing(self) -> Outgoing:
        """What the destination is sent: the one place a frozen request's body takes the payload's place
        (its `payload_hash` is already of that body: `create_handoff`)."""
        return Outgoing(
            action_key=self.action_key,
            payload=sent_body(self.request, self.payload),
            payload_hash=self.payload_hash,
            undo=self.undo,
            request=self.request,
        )


class ClaimedRow(NamedTuple):
    """One claimed row, as both claims below read it back, by column name: the handoff's columns after the
    claim, its new attempt's id (None when not read back), whether its delivery records more than itself
    (`Claim.follow_up`), and for a compensation the step it reverses, its key and receipt (None otherwise).
    The step was a query of its own after the claim whenever a batch held a follow-up (every step of a
    workflow but its last): a round trip before the send that only compensations needed."""

    id: int
    action_key: str
    payload: dict
    payload_hash: str
    attempts: int
    fencing_epoch: int
    attempts_in_run: int
    destination: str
    workspace_id: int
    request: dict | None
    lease_expires_at: datetime
    attempt_id: int | None
    follow_up: bool
    undo_key: str | None = None
    undo_receipt: str | None = None


# The handoff's columns a claim reads back, in `ClaimedRow`'s order.
CLAIMED_COLUMNS = ClaimedRow._fields[:11]


def handoff_claim_due(
    *,
    worker: str,
    limit: int = 20,
    lease_seconds: int | None = None,
    handoff_id: int | None = None,
    destination_name: str | None = None,
    mark_not_called: bool = False,
) -> list[Claim]:
    """Claim up to `limit` due handoffs for `worker` and open an attempt for each (a span each, when traced).
    `mark_not_called` (a destination without idempotency): each attempt is opened "not called yet" in the
    claim itself, so that a dispatcher stopped or cut off between the claim and its first statement after
    it leaves attempts known never sent, not unknown ones a person must settle."""
    started = time_ns()
    _check_timeline()
    rows = _claimed_rows(
        worker=worker,
        limit=limit,
        lease_seconds=lease_seconds or settings.HANDOFF_LEASE_SECONDS,
        call_started=False if mark_not_called else None,
        destination_name=destination_name,
        handoff_id=handoff_id,
    )
    return _claims_of(rows, worker, started)


def _check_timeline() -> None:
    if settings.HANDOFF_TIMELINE_CHECK_EACH_CLAIM and connections[DB].vendor == "postgresql":
        timeline_check(connections[DB])


def _claims_of(rows: list[ClaimedRow], worker: str, started: int) -> list[Claim]:
    claims = [
        Claim(
            handoff_id=row.id,
            action_key=row.action_key,
            payload=row.payload,
            payload_hash=row.payload_hash,
            attempt_number=row.attempts,
            worker=worker,
            epoch=row.fencing_epoch,
            attempt_id=row.attempt_id,
            run_attempt=row.attempts_in_run,
            follow_up=row.follow_up,
            workspace_id=row.workspace_id,
            request=row.request,
            leased_until=row.lease_expires_at,
            undo=_undo_target(row),
        )
        for row in rows
    ]
    past_spans(
        "handoff.claim",
        started,
        ((c.action_key, {"handoff.attempt": c.attempt_number}) for c in claims),
    )
    return claims


def _undo_target(row: ClaimedRow) -> UndoTarget | None:
    """A compensation's step to reverse (its key, its receipt id or ""), as the claim read it; None otherwise."""
    if row.undo_key is None:
        return None
    return UndoTarget(action_key=row.undo_key, receipt_id=row.undo_receipt or "")


def _claimed_rows(
    *,
    worker: str,
    limit: int,
    lease_seconds: int,
    call_started: bool | None,
    destination_name: str | None,
    handoff_id: int | None,
) -> list[ClaimedRow]:
    if connections[DB].features.has_select_for_update_skip_locked:
        return _claim_skip_locked(
            _claim_statement(destination_name, handoff_id, limit),
            worker=worker,
            lease_seconds=lease_seconds,
            call_started=call_started,
        )
    return _claim_and_record_row_count(
        _due(destination_name, handoff_id),
        worker=worker,
        limit=limit,
        lease_seconds=lease_seconds,
        call_started=call_started,
    )


class TurnClaim(NamedTuple):
    """What one delivery turn's statement (`handoff_claim_turn`) read and claimed."""

    # The destination's limits, holds and breaker (`LIMITS_COLUMNS` values), then its row (kind, enabled,
    # configuration; None each without a row), as `turn_reads_statement` reads them.
    reads: tuple
    # Of that row as read: the claim went ahead only when the caller named it.
    fingerprint: str
    # The claim went ahead: no live hold, no breaker pause, no limit that takes a slot, and the row unchanged.
    # False: nothing was claimed, and the turn takes the usual path with these reads.
    went: bool
    claims: list[Claim]


# The turn's reads by name in the turn's statement: the limits' columns (`outbox/services/limits.py`), whether a
# live hold exists, then the destination's row.
_TURN_READS = (
    "max_concurrency, max_requests_per_second, paused, probes, found, held, kind, enabled, config"
)


def turn_reads_statement(name: str) -> tuple[str, tuple]:
    """A delivery turn's reads in one statement: the destination's limits, holds and breaker, and its row (so
    that a change is served by the turn that reads it), each one row, joined."""
    limits_sql, limits_params = limits_statement(name)
    return (
        f"SELECT * FROM ({limits_sql}) AS limits "  # noqa: S608 - both compiled by the ORM, values parameters
        f"LEFT JOIN ({destination_row_statement()}) AS destination ON 1 = 1",
        (*limits_params, name),
    )


def handoff_claim_turn(
    *,
    name: str,
    worker: str,
    limit: int,
    lease_seconds: int,
    fingerprint: str,
    call_started: bool | None,
) -> TurnClaim:
    """A delivery turn in one round trip before its calls (PostgreSQL): the turn's reads
    (`turn_reads_statement`) and, in the same statement, the claim of up to `limit` due handoffs, which goes
    ahead only when the reads let the turn's permit and breaker be given without a statement of their own (no
    live hold, no breaker pause, neither limit set) and the destination's row is the one `fingerprint` names
    (the one whose build gave `call_started`). Otherwise nothing is claimed and the caller takes the usual
    path (`dispatch_batch`) with the reads returned. A turn was two round trips between a wake-up and its
    claim (the reads, then the claim), as many for a dispatcher woken for a handoff another one claims."""
    started = time_ns()
    _check_timeline()
    sql, reads_params, due_params = compiled_once(
        ("turn claim", name, limit), lambda: _turn_claim_sql(name, limit)
    )
    unlimited_by_default = not (
        settings.HANDOFF_DESTINATION_MAX_CONCURRENCY
        or settings.HANDOFF_DESTINATION_MAX_REQUESTS_PER_SECOND
    )
    params = [
        *reads_params,
        unlimited_by_default,
        fingerprint,
        *due_params,
        *_claim_params(worker, lease_seconds, call_started),
    ]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    reads_count = LIMITS_COLUMNS + 3
    first = rows[0]
    return TurnClaim(
        reads=first[:reads_count],
        fingerprint=first[reads_count + 1],
        went=first[reads_count],
        claims=_claims_of(_converted(_turn_claimed(rows, reads_count + 2)), worker, started),
    )


def _turn_claimed(rows: list[tuple], at: int) -> list[ClaimedRow]:
    """The claimed rows of a turn's statement, from column `at` on: each row's columns as the claim returned them
    (`c.*`: `CLAIMED_COLUMNS`, its due time, whether it follows up, the step it compensates), then the step's key
    and receipt and its attempt's id. A turn that claimed nothing has one row, of NULLs from `at` on."""
    return [
        ClaimedRow(
            *row[at : at + len(CLAIMED_COLUMNS)],
            follow_up=row[-5],
            undo_key=row[-3],
            undo_receipt=row[-2],
            attempt_id=row[-1],
        )
        for row in rows
        if row[at] is not None
    ]


def _turn_claim_sql(name: str, limit: int) -> tuple[str, tuple, tuple]:
    reads_sql, reads_params = constants_in_text(*turn_reads_statement(name))
    row = "md5(ROW(kind, enabled, config)::text)"
    before = (
        f"turn_reads ({_TURN_READS}) AS ({reads_sql}), "  # noqa: S608 - compiled by the ORM, values parameters
        "turn_go AS (SELECT NOT held AND paused IS NOT TRUE AND CASE WHEN found IS TRUE THEN "
        "COALESCE(max_concurrency, 0) = 0 AND COALESCE(max_requests_per_second, 0) = 0 ELSE %s::boolean END "
        f"AND {row} = %s AS went, {row} AS fingerprint FROM turn_reads), "
    )
    # `c.*` and `g.*` rather than the columns by name, as `_claim_sql` reads them back, and read by position:
    # 170 characters of the text (its length: `constants_in_text`).
    read_back = (
        f"SELECT r.*, g.*, c.*, {_UNDO_COLUMNS}, a.id "  # noqa: S608 - our own column names
        "FROM turn_reads r CROSS JOIN turn_go g "
        f"LEFT JOIN (claimed c JOIN attempt a ON a.handoff_id = c.id {_UNDO_JOIN}) ON TRUE "
        "ORDER BY c.due_at, c.id"
    )
    # The claim's due rows only when the reads let it go (one value for the statement: PostgreSQL reads it once
    # and scans nothing when it is false).
    due = _due(name, None).filter(
        RawSQL("(SELECT went FROM turn_go)", (), output_field=BooleanField())
    )
    sql, due_params = _claim_sql(due, limit=limit, before=before, read_back=read_back)
    return sql, reads_params, tuple(due_params)


def _due(destination_name: str | None, handoff_id: int | None):
    due = Handoff.objects.using(DB).due()
    if destination_name is not None:
        due = due.filter(destination=destination_name)
    if handoff_id is not None:
        due = due.filter(pk=handoff_id)
    return due


def _claim_statement(
    destination_name: str | None, handoff_id: int | None, limit: int
) -> tuple[str, list]:
    if handoff_id is not None:  # one handoff delivered now: not a batch of the loop
        return _claim_sql(_due(destination_name, handoff_id), limit=limit)
    # A destination's batches: compiled once per destination and batch size (the due query compiled through
    # the ORM at every batch cost a dispatcher more CPU than the statement itself).
    return compiled_once(
        ("claim", destination_name, limit),
        lambda: _claim_sql(_due(destination_name, None), limit=limit),
    )


def _claim_sql(due, *, limit: int, before: str = "", read_back: str = "") -> tuple[str, list]:
    """The claim statement's text and the due query's parameters. The row locks are written here, not by
    select_for_update(): Django compiles that only inside a transaction, and this statement is its own.
    `before`: common table expressions ahead of the claim's (the turn's reads, `handoff_claim_turn`);
    `read_back`: the final select in place of the claimed rows' own."""
    connection = connections[DB]
    qn = connection.ops.quote_name
    query = due.order_by("next_attempt_at", "id").values("id")[:limit].query
    # Its table by a short alias (`V0`), as Django names a subquery's: 14 characters a column instead of the
    # table's quoted name, a dozen times (the text's length: `constants_in_text`).
    query.bump_prefix(query)
    select_sql, select_params = constants_in_text(*query.sql_with_params())
    select_sql += " FOR NO KEY UPDATE SKIP LOCKED"
    handoffs, attempts, events = (
        qn(model._meta.db_table) for model in (Handoff, Attempt, HandoffEvent)
    )
    returned = ", ".join(f"h.{column}" for column in CLAIMED_COLUMNS)
    columns = ", ".join(f"c.{column}" for column in CLAIMED_COLUMNS)
    read_back = read_back or (
        f"SELECT {columns}, a.id AS attempt_id, c.follow_up, "  # noqa: S608 - our own column names
        "v.action_key AS undo_key, v.destination_id AS undo_receipt "
        # In the order they fell due (the due query's): a join's output has no order of its own, and a batch's
        # calls go out in the order read here (a hash join once sent a batch's sixth e-mail third).
        f"FROM claimed c JOIN attempt a ON a.handoff_id = c.id {_UNDO_JOIN} ORDER BY c.due_at, c.id"
    )
    sql = (
        f"WITH {before}due AS ({select_sql}), "  # noqa: S608 - the inner query is Django's, values parameters
        f"claimed AS (UPDATE {handoffs} AS h SET state = %s, lease_owner = %s, "
        f"lease_expires_at = {POSTGRES_NOW_PLUS}, fencing_epoch = h.fencing_epoch + 1, "
        "attempts = h.attempts + 1, attempts_in_run = h.attempts_in_run + 1, updated_at = STATEMENT_TIMESTAMP() "
        "FROM due WHERE h.id = due.id "
        f"RETURNING {returned}, h.next_attempt_at AS due_at, "
        "h.plan <> '[]'::jsonb OR h.compensates_id IS NOT NULL AS follow_up, h.compensates_id AS u), "
        f"attempt AS (INSERT INTO {attempts} (handoff_id, number, fencing_epoch, worker, started_at, outcome, "
        "call_started, failure_class, reason_code, detail) "
        "SELECT id, attempts, fencing_epoch, %s, STATEMENT_TIMESTAMP(), %s, %s::boolean, '', '', '' FROM claimed "
        "RETURNING id, handoff_id), "
        f"event AS (INSERT INTO {events} (handoff_id, from_state, to_state, actor_label, action, reason, at) "
        "SELECT id, %s, %s, %s, '', 'claimed for attempt ' || attempts || ' at ' || destination, "
        "STATEMENT_TIMESTAMP() "
        "FROM claimed) "
        f"{read_back}"
    )
    return sql, select_params


# A compensation's step (`v`), read in the claim's own statement: its key and receipt (`ClaimedRow.undo_key`).
_UNDO_COLUMNS = "v.action_key, v.destination_id"
_UNDO_JOIN = f"LEFT JOIN {Handoff._meta.db_table} v ON v.id = c.u"


def constants_in_text(sql: str, params: tuple) -> tuple[str, tuple]:
    """The due query with its states and the empty ordering key written into its text, its other values (the
    destination, the times) still parameters: the claim is prepared (`_claim_skip_locked`), and only a plan
    that sees `state = 'pending'` may use the claim's partial index, so PostgreSQL chose no generic plan and
    planned every claim again (0.5 ms, ten times an empty claim's run). Our own constants only (`[a-z_]*`).
    Now on the database clock (`db_now()`) compiles to the statement's time with no parameter (`DbNow`): a
    turn's claim (`_turn_claim_sql`) holds seven, within the text's 4,096 characters that psycopg keeps
    converted (`MAX_CACHED_STATEMENT_LENGTH`; a longer text is parsed again at each execution)."""
    if "%%" in sql:  # each "%s" below must be a placeholder
        raise ValueError("the due query holds an escaped %: its placeholders cannot be told apart")
    pieces, kept = sql.split("%s"), []
    text = [pieces[0]]
    for value, piece in zip(params, pieces[1:], strict=True):
        if isinstance(value, HandoffState) or value == "":
            text.append(f"'{str(value)}'")
        else:
            text.append("%s")
            kept.append(value)
        text.append(piece)
    return "".join(text), tuple(kept)


def _claim_skip_locked(
    statement: tuple[str, list],
    *,
    worker: str,
    lease_seconds: int,
    call_started: bool | None,
) -> list[ClaimedRow]:
    """PostgreSQL, one statement and one round trip: lock due rows (skipping those another worker holds), lease
    them, open an attempt and write the claim event for each, and read them back with their attempt ids:
    `WITH due AS (SELECT … FOR NO KEY UPDATE SKIP LOCKED), claimed AS (UPDATE … RETURNING), attempt AS
    (INSERT … RETURNING), event AS (INSERT …) SELECT …`. Committed on its own (autocommit): a claim is
    all of it or none of it. The lease, the attempt's start and the event's time are the database's clock
    (the statement's time), as for every other time of record."""
    sql, select_params = statement
    params = [*select_params, *_claim_params(worker, lease_seconds, call_started)]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        if not (rows := cursor.fetchall()):
            return []  # nothing due: the columns' description (built per statement) is not read
        names = [column.name for column in cursor.description]
        fetched = [ClaimedRow(**dict(zip(names, row, strict=True))) for row in rows]
    return _converted(fetched)


def _claim_params(worker: str, lease_seconds: int, call_started: bool | None) -> list:
    """The claim's own parameters, after the due query's."""
    return [
        S.IN_FLIGHT,
        worker,
        lease_seconds,
        worker,
        AttemptOutcome.IN_PROGRESS,
        call_started,
        S.PENDING,
        S.IN_FLIGHT,
        worker,
    ]


def _converted(fetched: list[ClaimedRow]) -> list[ClaimedRow]:
    """The claimed rows with their JSON columns as the model's fields read them."""
    if not fetched:
        return fetched
    connection = connections[DB]
    payload_field = Handoff._meta.get_field("payload")
    request_field = Handoff._meta.get_field("request")
    return [
        row._replace(
            payload=payload_field.from_db_value(row.payload, None, connection),
            request=request_field.from_db_value(row.request, None, connection),
        )
        for row in fetched
    ]


def _claim_row_count(due, *, worker: str, limit: int, lease_seconds: int) -> list[dict]:
    """SQLite has no row locks: claim each row with an update that only succeeds while the row is still
    pending, checked by its row count. The claimed rows' `CLAIMED_COLUMNS` and a compensation's step, by name."""
    changes = {
        "state": S.IN_FLIGHT,
        "lease_owner": worker,
        # The lease is measured on the database clock, so workers on other machines agree on it.
        "lease_expires_at": db_now_plus(lease_seconds),
        "fencing_epoch": F("fencing_epoch") + 1,
        "attempts": F("attempts") + 1,
        "attempts_in_run": F("attempts_in_run") + 1,
        "updated_at": db_now(),
    }
    candidates = list(due.order_by("next_attempt_at", "id").values_list("id", flat=True)[:limit])
    still_pending = Handoff.objects.using(DB).filter(state=S.PENDING)
    ids = [pk for pk in candidates if still_pending.filter(pk=pk).update(**changes)]
    if not ids:
        return []
    return list(
        Handoff.objects.using(DB)
        .filter(pk__in=ids, lease_owner=worker, state=S.IN_FLIGHT)
        .order_by("next_attempt_at", "id")
        .values(
            *CLAIMED_COLUMNS,
            undo_key=F("compensates__action_key"),
            undo_receipt=F("compensates__destination_id"),
        )
    )


def _claim_and_record_row_count(
    due, *, worker: str, limit: int, lease_seconds: int, call_started: bool | None
) -> list[ClaimedRow]:
    """Elsewhere (SQLite): the claim, then an attempt and a claim event per row, in one transaction."""
    with transaction.atomic(using=DB):
        rows = _claim_row_count(due, worker=worker, limit=limit, lease_seconds=lease_seconds)
        if not rows:
            return []
        attempts = Attempt.objects.using(DB).bulk_create(
            Attempt(
                handoff_id=row["id"],
                number=row["attempts"],
                fencing_epoch=row["fencing_epoch"],
                worker=worker,
                started_at=db_now(),
                call_started=call_started,
            )
            for row in rows
        )
        HandoffEvent.objects.using(DB).bulk_create(
            HandoffEvent(
                handoff_id=row["id"],
                from_state=S.PENDING,
                to_state=S.IN_FLIGHT,
                actor_label=worker,
                reason=f"claimed for attempt {row['attempts']} at {row['destination']}",
            )
            for row in rows
        )
    attempt_ids = {attempt.handoff_id: attempt.pk for attempt in attempts}
    return [
        ClaimedRow(**row, attempt_id=attempt_ids.get(row["id"]), follow_up=True) for row in rows
    ]


def claim_resend_blocked(claim: Claim, destination: Destination) -> DeliveryResult | None:
    """The answer that stands in for the call when this claim may not be sent: a destination without
    idempotency where an earlier attempt of this run may have reached the receiver. None: send it."""
    if destination.supports_idempotency:
        return None
    # Only this run's attempts: a person who checked the receiver and let it be sent again started a new run.
    earlier = Attempt.objects.using(DB).filter(
        handoff_id=claim.handoff_id,
        number__lt=claim.attempt_number,
        number__gt=claim.attempt_number - claim.run_attempt,
    )
    # Failed ones and skipped ones (never sent: their lease ran out before the call) reached nobody.
    if not earlier.exclude(outcome__in=(AttemptOutcome.FAILED, AttemptOutcome.SKIPPED)).exists():
        return None
    # Without idempotency, an earlier attempt that may have reached the receiver means a person must
    # check there first: nothing is sent twice automatically.
    return DeliveryResult.failed(
        FailureClass.UNCERTAIN,
        "not_idempotent_resend_blocked",
        "the destination does not honour idempotency keys and an earlier attempt may have reached it",
    )
