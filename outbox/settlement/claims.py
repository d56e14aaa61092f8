"""Settlement's claims: a batch of one destination's uncertain handoffs leased to one settler, so that two
dispatchers never ask the receiver about the same key at once, and each answer written under its claim's
fencing token.

A claimed row stays `uncertain`: the claim is its lease (`lease_owner`, `lease_expires_at` on the database
clock) and a new `fencing_epoch`, the columns a delivery claim uses. An uncertain row holds no delivery lease
(every move out of `in_flight` clears it), so a row is free for settlement while its lease is empty or has
run out, and a settler that stopped (killed, lost its connection) holds its rows for one lease at most. A
claim does not touch `updated_at`: the order "longest unsettled first" stays the order of the rows' last
moves. The outcome is written only while the row is still uncertain and still carries the claim's owner and
epoch: a settler whose lease ran out and was taken over by another writes nothing
(`handoffs_record_settlements`).
"""

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import connections, transaction
from django.db.models import F, Q

from lib.databases import DB
from outbox.bulk_writes import update_many
from outbox.clock import POSTGRES_NOW_PLUS, db_now, db_now_plus
from outbox.destinations import Lookups, RemoteTask
from outbox.dispatch.leases import Renewed
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.outcomes import Settlement, Unanswered, settlement_for, settlement_without_answer
from outbox.services.moves import move_changes, transition_changes
from outbox.services.transitions import lock_with_compensated_steps
from outbox.services.workflows import record_successors
from outbox.settlement.found import record_found_delivered

S = HandoffState


@dataclass(frozen=True)
class SettlementClaim:
    """One uncertain handoff leased to `worker` for settlement; `epoch` is its fencing token."""

    handoff_id: int
    action_key: str
    epoch: int
    worker: str
    # The handoff's own, read back by the claim: an answer finding a task of this hash settles it as delivered.
    payload_hash: str = ""
    # Its delivery records more than itself (a next workflow step, a compensation): written on the locked path.
    follow_up: bool = True
    # Its lease's end on the database clock, as the claim set it: the pass's lookups state the database's time
    # from it (`outbox/clock.py` `calls_on_db_clock`).
    leased_until: datetime | None = None


class SettlementAnswer(NamedTuple):
    """What the receiver said about a claim's key: its task (None: it has none), or why nothing is known."""

    claim: SettlementClaim
    remote: RemoteTask | None
    error: str = ""


def _free_for_settlement(destination_name: str):
    """The destination's uncertain rows no settler holds, longest unsettled first, read in the order of the
    partial uncertain index (`updated_at` alone). A tiebreak on `id` is not in that index: with many rows moved
    in one statement (a lease expiry, an outage) they share `updated_at`, and PostgreSQL then read and sorted the
    whole backlog for every claim (a sequential scan and a sort of 6,000 rows, 8.8 ms, against 0.1 ms by the
    index), every dispatcher at once."""
    lease_free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=db_now())
    return (
        Handoff.objects.using(DB)
        .filter(lease_free, state=S.UNCERTAIN, destination=destination_name)
        .order_by("updated_at")
    )


def handoff_claim_uncertain(
    *, destination_name: str, worker: str, limit: int, lease_seconds: float | None = None
) -> list[SettlementClaim]:
    """Lease up to `limit` of the destination's uncertain handoffs to `worker` for settlement."""
    lease_seconds = lease_seconds or settings.HANDOFF_LEASE_SECONDS
    if connections[DB].features.has_select_for_update_skip_locked:
        rows = _claim_skip_locked(
            destination_name, worker=worker, limit=limit, lease_seconds=lease_seconds
        )
    else:
        free = _free_for_settlement(destination_name)
        rows = _claim_row_count(free, worker=worker, limit=limit, lease_seconds=lease_seconds)
    # PostgreSQL's claim returns its one lease end (the statement's time) in one row only.
    claimed_until = next((row[5] for row in rows if row[5] is not None), None)
    return [
        SettlementClaim(
            pk,
            key,
            epoch,
            worker,
            payload_hash=digest,
            follow_up=follow_up,
            leased_until=claimed_until if until is None else until,
        )
        for pk, key, epoch, digest, follow_up, until in sorted(rows)
    ]


@functools.cache
def _claim_sql() -> str:
    """The claim's statement, `_free_for_settlement`'s query compiled once per process: compiling it for every
    claim cost a settler more CPU than the claim's round trip. Its parameters: the destination, the state,
    the limit, the worker, the lease's seconds (now on the database clock is the statement's time, not a
    parameter). The lease's end, the same for every row (the statement's time), comes in one row and NULL in the
    others: Django's loader of a time with its zone runs in Python, and loading it for each of 200 rows was two
    thirds of the claim's profile."""
    connection = connections[DB]
    select_sql, params = _free_for_settlement(_NAME).values("id").query.sql_with_params()
    if list(params) != [_NAME, S.UNCERTAIN]:  # the order `_claim_skip_locked` sends them in
        raise RuntimeError(f"the settlement claim's parameters changed: {params}")
    table = connection.ops.quote_name(Handoff._meta.db_table)
    return (
        f"WITH free AS ({select_sql} LIMIT %s FOR NO KEY UPDATE SKIP LOCKED), "  # noqa: S608 - the ORM's
        f"claimed AS (UPDATE {table} AS h SET lease_owner = %s, lease_expires_at = {POSTGRES_NOW_PLUS}, "
        "fencing_epoch = h.fencing_epoch + 1 "
        "FROM free WHERE h.id = free.id "
        "RETURNING h.id, h.action_key, h.fencing_epoch, h.payload_hash, "
        "h.plan <> '[]'::jsonb OR h.compensates_id IS NOT NULL AS follow_up, h.lease_expires_at) "
        "SELECT id, action_key, fencing_epoch, payload_hash, follow_up, "
        "CASE WHEN row_number() OVER () = 1 THEN lease_expires_at END FROM claimed"
    )


_NAME = "destination name"  # a stand-in, compiled to a parameter


def _claim_skip_locked(
    destination_name: str, *, worker: str, limit: int, lease_seconds: float
) -> list[tuple]:
    """PostgreSQL, one statement: `WITH free AS (SELECT … FOR NO KEY UPDATE SKIP LOCKED) UPDATE … RETURNING`.
    SKIP LOCKED passes over the rows another settler is claiming this instant (or a person's reconcile is
    writing) instead of queueing behind it; a row it waited for would be re-read and, leased meanwhile, left
    out. Committed on its own (autocommit), like the delivery claim."""
    params = [destination_name, S.UNCERTAIN, limit, worker, lease_seconds]
    with connections[DB].cursor() as cursor:
        cursor.execute(_claim_sql(), params)
        return cursor.fetchall()


def _claim_row_count(free, *, worker: str, limit: int, lease_seconds: float) -> list[tuple]:
    """SQLite (one writer at a time, no row locks): each row leased by an UPDATE that only succeeds while it is
    still free and at the epoch read, checked by its row count."""
    with transaction.atomic(using=DB):
        candidates = list(free.values_list("id", "fencing_epoch")[:limit])
        claimed = [
            pk
            for pk, epoch in candidates
            if Handoff.objects.using(DB)
            .filter(
                Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=db_now()),
                pk=pk,
                state=S.UNCERTAIN,
                fencing_epoch=epoch,
            )
            .update(
                lease_owner=worker,
                lease_expires_at=db_now_plus(lease_seconds),
                fencing_epoch=F("fencing_epoch") + 1,
            )
        ]
        rows = (
            Handoff.objects.using(DB)
            .filter(pk__in=claimed, lease_owner=worker)
            .values_list(
                "id",
                "action_key",
                "fencing_epoch",
                "payload_hash",
                "plan",
                "compensates_id",
                "lease_expires_at",
            )
        )
        return [(*row[:4], bool(row[4]) or row[5] is not None, row[6]) for row in rows]


def _held(claims: list[SettlementClaim]):
    """The claims' rows that are still theirs: uncertain, same owner, same epoch."""
    mine = Q(pk__in=[])
    for claim in claims:
        mine |= Q(pk=claim.handoff_id, fencing_epoch=claim.epoch)
    return Handoff.objects.using(DB).filter(mine, state=S.UNCERTAIN, lease_owner=claims[0].worker)


def handoff_renew_settlement_claims(
    *, claims: list[SettlementClaim], lease_seconds: float
) -> Renewed:
    """Extend the leases of the claims still held: their ids (the others were taken over or settled) and the
    leases' new end."""
    if not claims:
        return Renewed(set(), None)
    with transaction.atomic(using=DB):
        held = _held(claims)
        held.update(lease_expires_at=db_now_plus(lease_seconds))
        rows = list(held.values_list("pk", "lease_expires_at"))
    return Renewed({pk for pk, _until in rows}, max((until for _pk, until in rows), default=None))


def handoff_release_settlement_claims(*, claims: list[SettlementClaim]) -> int:
    """Give back claims that were not asked about (the destination's limits refused, the settler stops): free
    for the next settler at once. The state does not change, so no event is written."""
    if not claims:
        return 0
    return _held(claims).update(lease_owner="", lease_expires_at=None)


def handoffs_record_settlements(
    *, answers: list[SettlementAnswer], destination: Lookups
) -> list[str | None]:
    """Write what each answer means (`outbox/outcomes.py` `settlement_for`), each move with its event. A claim no
    longer held (taken over after its lease ran out, or moved by a person meanwhile) writes nothing: None in its
    place. On PostgreSQL the answers that found their task with the same payload hash, for claims that record
    nothing else, are one statement (`outbox/settlement/found.py`); the others are one transaction with
    the rows locked in id order. An answer that says nothing (the receiver could not be asked) frees the row for
    the next pass, without an event."""
    written = _record_found(answers, destination)
    rest = [answer for answer in answers if answer.claim.handoff_id not in written]
    states = _record_locked(rest, destination) if rest else {}
    return [
        S.DELIVERED if answer.claim.handoff_id in written else states[answer.claim.handoff_id]
        for answer in answers
    ]


def _found_as_claimed(answer: SettlementAnswer) -> bool:
    claim, remote = answer.claim, answer.remote
    return (
        not answer.error
        and remote is not None
        and not claim.follow_up
        and bool(claim.payload_hash)
        and remote.payload_hash == claim.payload_hash
    )


class _AsClaimed(NamedTuple):
    """All `settlement_for` reads of a row whose answer found its task with the same hash: the row as its claim
    read it (a model instance each costs more than the statement that writes them)."""

    payload_hash: str
    state: str = S.UNCERTAIN
    payload: dict | None = None
    # What was sent (`Handoff.sent_body`): not needed where the hashes match.
    sent_body: dict | None = None


def _record_found(answers: list[SettlementAnswer], destination: Lookups) -> set[int]:
    found = [answer for answer in answers if _found_as_claimed(answer)]
    workers = {answer.claim.worker for answer in found}
    if not found or len(workers) != 1 or connections[DB].vendor != "postgresql":
        return set()
    rows, now = [], db_now()  # one time of record for the request's rows, not one built per key
    for answer in found:
        claim = answer.claim
        settled = settlement_for(
            _AsClaimed(claim.payload_hash), answer.remote, destination, now=now
        )
        changes = move_changes(
            S.UNCERTAIN, settled.to_state, settled.changes, action_key=claim.action_key
        )
        rows.append((claim.handoff_id, claim.epoch, claim.payload_hash, settled.reason, changes))
    return record_found_delivered(rows, worker=workers.pop())


def _record_locked(answers: list[SettlementAnswer], destination: Lookups) -> dict[int, str | None]:
    ids = sorted(answer.claim.handoff_id for answer in answers)
    states: dict[int, str | None] = {}
    with transaction.atomic(using=DB):
        lock_with_compensated_steps(ids)
        locked = {
            handoff.pk: handoff
            for handoff in Handoff.objects.using(DB)
            .select_for_update(no_key=True)
            .filter(pk__in=ids, state=S.UNCERTAIN)
            .order_by("pk")
        }
        moves: list[tuple[Handoff, Settlement]] = []
        for answer in answers:
            handoff = locked.get(answer.claim.handoff_id)
            if handoff is None or (handoff.lease_owner, handoff.fencing_epoch) != (
                answer.claim.worker,
                answer.claim.epoch,
            ):
                states[answer.claim.handoff_id] = None
                continue
            moves.append((handoff, _meaning(handoff, answer, destination)))
            states[handoff.pk] = moves[-1][1].to_state or handoff.state
        _write_moves(moves)
    return states


def _meaning(handoff: Handoff, answer: SettlementAnswer, destination: Lookups) -> Settlement:
    if answer.error:
        return settlement_without_answer(handoff, destination, Unanswered(answer.error))
    return settlement_for(handoff, answer.remote, destination)


def _write_moves(moves: list[tuple[Handoff, Settlement]]) -> None:
    """Each move and its event, as the delivery outcomes are written (the moves in one statement, the events
    in another); a row about which nothing was learnt (nobody asked, no event) is only freed for the next pass."""
    unmoved = [handoff.pk for handoff, settled in moves if settled.to_state is None]
    if unmoved:
        Handoff.objects.using(DB).filter(pk__in=unmoved).update(
            lease_owner="", lease_expires_at=None
        )
    changed, fields, events = [], {"updated_at"}, []
    for handoff, settled in moves:
        if settled.to_state is None:
            continue
        events.append(
            HandoffEvent(
                handoff_id=handoff.pk,
                from_state=handoff.state,
                to_state=settled.to_state,
                actor_label="settlement",
                reason=settled.reason,
            )
        )
        changes = transition_changes(handoff, settled.to_state, settled.changes)
        for name, value in changes.items():
            setattr(handoff, name, value)
        handoff.updated_at = db_now()
        fields.update(changes)
        changed.append(handoff)
    if changed:
        update_many(changed, sorted(fields), using=DB)
        HandoffEvent.objects.using(DB).bulk_create(events)
        record_successors([h for h in changed if h.state == S.DELIVERED], actor_label="settlement")
