"""Per-destination limits the operator sets: calls in flight at once, requests per second, and the hold a
`Retry-After` answer puts on the whole destination. They hold across dispatcher processes and hosts, so
their state lives in the database and every time is the database's (`outbox/clock.py`).

A dispatcher asks for a permit before it claims anything (`destination_acquire`). Refused, it claims nothing,
spends no handoff's attempt or retry window, and waits `DestinationLimited.wait_seconds` (bounded).

- Concurrency: a `DestinationSlot` of kind "concurrency" per call in flight, taken by a conditional UPDATE
  (its `free_at` is empty or past) and given back right after the call. Its lease (`free_at`) is renewed
  with the handoffs' leases, so that a slot whose holder was SIGKILLed comes back after one lease.
- Requests per second: a slot of kind "rate" per request; free again one second after the request's answer
  came back. A request reaches the receiver after its slot was taken and before its answer comes back, so
  two requests on the same slot reach the receiver more than a second apart, whatever the network did with
  them: no more than the limit ever arrive within one second. (A GCRA on the sender's clock spaces the sends,
  but the receiver counts arrivals, and a delayed request can arrive next to the following one.) The price:
  a slot serves one request per (1 s + call time).
- Hold: no permit while any hold no probe ends is live (`DestinationHold`: an operator's pause or window,
  an unservable hold, a Retry-After hold). A 429 or 503 answer with `Retry-After` writes a Retry-After hold
  until the time it asked for (capped by HANDOFF_DESTINATION_MAX_HOLD_SECONDS); an extension keeps its
  start.

One call is one HTTP request: a batch call carrying 50 handoffs takes one rate slot. Lookups and key listings
(settlement, reconciliation, an operator's reconcile) are requests too: `LimitedLookups`
(`outbox/services/lookup_limits.py`) takes a permit for each, or one for a run of one-key lookups made one after
another (a rate slot each, as a claim batch's calls). The numbers and the permit itself are
`outbox/limit_rules.py`.
"""

import contextlib
import time
import uuid

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Exists, F, OuterRef, Q, Value
from django.db.models.functions import Greatest

from lib.databases import DB, compiled_once, prepared_cursor
from outbox.breaker_rules import BreakerSeen
from outbox.clock import db_now, db_now_plus
from outbox.limit_rules import (
    CONCURRENCY_POLL_SECONDS,
    MAX_WAIT_SECONDS,
    RATE_WINDOW_SECONDS,
    DestinationHeld,
    DestinationLimited,
    InvalidLimit,
    Limits,
    Permit,
    describe_limit,
    parse_limit,
)
from outbox.models import (
    DestinationEvent,
    DestinationHealth,
    DestinationHold,
    DestinationSlot,
    HoldKind,
    SlotKind,
)
from outbox.services.breaker import destination_health_locked

_LIMITS_COLUMNS = ("max_concurrency", "max_requests_per_second", "paused", "probes", "found")


def _limits_sql(name: str) -> tuple[str, tuple]:
    # One row whether or not the destination has its row yet (a healthy one may never get one): its limits,
    # the breaker and whether it has a row (`found`), LEFT JOINed to "held?" so that a destination without a
    # row is read in the same one statement. "Held?" is one EXISTS on the holds' partial index: any live hold
    # no probe ends (an operator's pause or window, a Retry-After hold, an unservable hold). "Paused by its
    # breaker?" is another, on the breaker's live holds (not the `state` column, which only the previous
    # release's dispatchers read).
    held = DestinationHold.objects.using(DB).held_without_probe().filter(destination=name)
    paused = DestinationHold.objects.of_breaker().filter(destination=OuterRef("name"))
    health = (
        DestinationHealth.objects.using(DB)
        .filter(name=name)
        .annotate(paused=Exists(paused), found=Value(True))
        .order_by()
        .values_list(*_LIMITS_COLUMNS)[:1]
    )
    held_sql, held_params = held.query.exists().get_compiler(using=DB).as_sql()
    health_sql, health_params = health.query.get_compiler(using=DB).as_sql()
    columns = ", ".join(f"l.{column}" for column in _LIMITS_COLUMNS)
    sql = (
        f"SELECT {columns}, EXISTS({held_sql}) "  # noqa: S608 (compiled by the ORM, every value a parameter)
        f"FROM (SELECT 1 AS one) AS one LEFT JOIN ({health_sql}) AS l ON 1 = 1"
    )
    return sql, (*held_params, *health_params)


def limits_statement(name: str) -> tuple[str, tuple]:
    """The read of the destination's limits, holds and breaker: one row, `LIMITS_COLUMNS` values
    (`limits_from_row`). Compiled once per destination: read at every claim batch, every lookup and every hold
    check of one, the query compiled through the ORM cost a dispatcher more CPU than the query itself."""
    return compiled_once(("limits", name), lambda: _limits_sql(name))


# The values of the limits' row (`limits_statement`): its columns and whether a live hold exists.
LIMITS_COLUMNS = len(_LIMITS_COLUMNS) + 1


def _limits(name: str) -> Limits:
    sql, params = limits_statement(name)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return limits_from_row(cursor.fetchone())


def limits_from_row(row: tuple) -> Limits:
    """The limits as `limits_statement` read them (a dispatcher's turn reads them with its destination's row
    in one statement: `outbox/dispatch/runner.py` `_turn_reads`)."""
    max_concurrency, max_requests_per_second, paused, probes, found, held = row
    if not found:
        # A destination not seen yet has the configured defaults (its row is written with them when needed);
        # it may still be held (an operator paused it before its first call).
        return Limits(
            settings.HANDOFF_DESTINATION_MAX_CONCURRENCY,
            settings.HANDOFF_DESTINATION_MAX_REQUESTS_PER_SECOND,
            bool(held),
        )
    return Limits(
        max_concurrency, max_requests_per_second, bool(held), BreakerSeen(bool(paused), probes)
    )


def _free(name: str, kind: str, limit: int):
    return (
        DestinationSlot.objects.using(DB)
        .filter(destination=name, kind=kind, number__lt=limit)
        .filter(Q(free_at__isnull=True) | Q(free_at__lte=db_now()))
    )


def _ensure_slots(name: str, kind: str, limit: int) -> None:
    have = set(
        DestinationSlot.objects.using(DB)
        .filter(destination=name, kind=kind, number__lt=limit)
        .values_list("number", flat=True)
    )
    missing = [
        DestinationSlot(destination=name, kind=kind, number=n)
        for n in range(limit)
        if n not in have
    ]
    if missing:
        DestinationSlot.objects.using(DB).bulk_create(missing, ignore_conflicts=True)


def _take(
    name: str, kind: str, limit: int, count: int, holder: str, lease_seconds: float
) -> list[int]:
    """Take up to `count` free slots for `holder`. PostgreSQL skips the rows another worker is taking
    (FOR UPDATE SKIP LOCKED); on both backends the UPDATE takes only rows still free when it runs, so two
    workers never hold one slot."""
    free = _free(name, kind, limit)
    # Slots numbered past a limit an operator lowered may still be busy: they count against the new limit
    # until they are free (they only go from busy to free, so counting them first is safe).
    beyond = (
        DestinationSlot.objects.using(DB)
        .filter(destination=name, kind=kind, number__gte=limit, free_at__gt=db_now())
        .count()
    )
    with transaction.atomic(using=DB):
        candidates = free.order_by("number")
        if connections[DB].features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True, no_key=True)
        ids = list(candidates.values_list("pk", flat=True)[: count + beyond])
        ids = ids[: min(count, max(0, len(ids) - beyond))]
        if not ids:
            return []
        free.filter(pk__in=ids).update(free_at=db_now_plus(lease_seconds), holder=holder)
        return list(
            DestinationSlot.objects.using(DB)
            .filter(pk__in=ids, holder=holder)
            .values_list("pk", flat=True)
        )


def _take_or_create(
    name: str, kind: str, limit: int, count: int, holder: str, lease_seconds: float
) -> list[int]:
    taken = _take(name, kind, limit, count, holder, lease_seconds)
    if (
        not taken
        and DestinationSlot.objects.using(DB)
        .filter(destination=name, kind=kind, number__lt=limit)
        .count()
        < limit
    ):
        # The limit was raised, or set by default: its slots are written the first time they are missing.
        _ensure_slots(name, kind, limit)
        taken = _take(name, kind, limit, count, holder, lease_seconds)
    return taken


def _seconds_until_free(name: str, kind: str, limit: int) -> float:
    """Seconds until the next slot of a kind is free again, both times read from the database clock."""
    row = (
        DestinationSlot.objects.using(DB)
        .filter(destination=name, kind=kind, number__lt=limit)
        .exclude(free_at__isnull=True)
        .annotate(now=db_now())
        .order_by("free_at")
        .values_list("free_at", "now", named=True)
        .first()
    )
    if row is None or row.now is None:
        return CONCURRENCY_POLL_SECONDS
    return max((row.free_at - row.now).total_seconds(), CONCURRENCY_POLL_SECONDS)


# Slots 0 … limit - 1 of a key, written if missing: numbered by a recursive query (PostgreSQL and SQLite alike;
# SQLite reads `ON CONFLICT` after a SELECT only behind a WHERE).
_SLOTS_SQL = (
    "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < %s) "
    "INSERT INTO {table} (destination, kind, number, free_at, holder) "
    "SELECT %s, %s, i, NULL, '' FROM n WHERE true ON CONFLICT DO NOTHING"
)


def slot_take_for(*, key: str, limit: int, holder: str, seconds: float) -> float:
    """One rate slot of `key` held for `seconds`, so that no more than `limit` are taken within any such
    window (across processes, database clock): 0 when taken, else the seconds until one is free. The same
    slots as a destination's requests per second; a caller's limit (outbox/services/call_limits.py) names
    its key so that it is no destination's. Its slots are written if missing in one statement every time, so
    that a call costs the same queries whether or not it is the key's first (pages pin their query counts):
    numbered by the database (`_SLOTS_SQL`), so that the statement is as short for a limit of 200 as of 10 (a
    row per slot, sent as parameters, was a third of a limited search's CPU at 200: issue 40)."""
    table = DestinationSlot._meta.db_table
    with connections[DB].cursor() as cursor:
        cursor.execute(_SLOTS_SQL.format(table=table), [limit, key, SlotKind.RATE.value])
    if _take(key, SlotKind.RATE, limit, 1, holder, seconds):
        return 0.0
    return _seconds_until_free(key, SlotKind.RATE, limit)


def destination_held_past(*, name: str, seconds: float) -> bool:
    """Whether a hold no probe ends holds the destination now and still will in `seconds` (database clock):
    an operator's pause without an end, an unservable hold, any hold ending later."""
    return (
        DestinationHold.objects.using(DB)
        .held_without_probe()
        .filter(destination=name)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=db_now_plus(seconds)))
        .exists()
    )


def destination_held(*, name: str) -> bool:
    """Whether a hold no probe ends (an operator's, a Retry-After, an unservable one) holds the destination
    now (database clock)."""
    return _limits(name).held


class HoldWatch:
    """For a run of calls under one permit (a claim batch's, a chunk of lookups): whether a hold or an
    operator's pause that began after the permit now holds the destination. Read at most every `every`
    seconds (HOLD_CHECK_SECONDS), from `since` (a `time.monotonic()` no later than the permit)."""

    def __init__(self, name: str, *, since: float, every: float):
        self.name, self.checked_at, self.every = name, since, every

    def held_now(self) -> bool:
        now = time.monotonic()
        if now - self.checked_at <= self.every:
            return False
        self.checked_at = now
        return destination_held(name=self.name)


def destination_acquire(
    *, name: str, worker: str, requests: int, lease_seconds: float, limits: Limits | None = None
) -> Permit:
    """A permit for up to `requests` requests to the destination, one call in flight. Raises
    DestinationLimited (nothing taken) while the destination is held or at its limits. `limits`: as the
    caller has just read them (`limits_statement`, with its destination's row), read here otherwise.

    The slots are leased for `lease_seconds` on the database clock (renewed with the handoffs' leases by
    `destination_renew`): a dispatcher that dies gives them back when the lease runs out."""
    limits = limits or _limits(name)
    holder = f"{worker}:{uuid.uuid4().hex[:12]}"
    permit = Permit(destination=name, holder=holder, requests=requests, breaker=limits.breaker)
    _refuse_if_held(name, limits)
    try:
        _take_slots(permit, limits, lease_seconds)
    except DestinationLimited:
        raise
    except Exception:
        # A database error after a slot was taken: give it back now rather than after its lease, if we can.
        with contextlib.suppress(Exception):
            destination_release(permit=permit)
        raise
    return permit


def _refuse_if_held(name: str, limits: Limits) -> None:
    """No permit while a hold is live (an operator's pause or window, a Retry-After, an unservable hold):
    asked again within MAX_WAIT_SECONDS, so the destination drains as soon as the last one ends."""
    if limits.held:
        raise DestinationHeld(
            f"destination {name} is held ({', '.join(_live_kinds(name))})", MAX_WAIT_SECONDS
        )


def _live_kinds(name: str) -> list[str]:
    """The kinds of the holds on the destination now, for the refusal's words (read only when refused)."""
    kinds = (
        DestinationHold.objects.using(DB)
        .held_without_probe()
        .filter(destination=name)
        .order_by("kind")
        .values_list("kind", flat=True)
        .distinct()
    )
    return [HoldKind(kind).label for kind in kinds] or ["a hold that has just ended"]


def _take_slots(permit: Permit, limits: Limits, lease_seconds: float) -> None:
    name, holder = permit.destination, permit.holder
    if limits.max_concurrency:
        permit.slot_ids = _take_or_create(
            name, SlotKind.CONCURRENCY, limits.max_concurrency, 1, holder, lease_seconds
        )
        if not permit.slot_ids:
            raise DestinationLimited(
                f"destination {name} has {limits.max_concurrency} call(s) in flight",
                CONCURRENCY_POLL_SECONDS,
            )
    if limits.max_requests_per_second:
        permit.rate_ids = _take_or_create(
            name,
            SlotKind.RATE,
            limits.max_requests_per_second,
            permit.requests,
            holder,
            lease_seconds + RATE_WINDOW_SECONDS,
        )
        if not permit.rate_ids:
            destination_release(permit=permit)
            raise DestinationLimited(
                f"destination {name} had {limits.max_requests_per_second} request(s) in the last second",
                _seconds_until_free(name, SlotKind.RATE, limits.max_requests_per_second),
            )
        permit.requests = len(permit.rate_ids)
    if permit.slot_ids or permit.rate_ids:
        fresh = _limits(name)
        permit.breaker = fresh.breaker  # the newer read, for the breaker's admission
        if fresh.held:
            # The hold may have been written after the first read: a worker holding a slot writes its hold
            # before it gives the slot back, so whoever takes that slot sees the hold here and sends nothing.
            destination_release(permit=permit)
            _refuse_if_held(name, fresh)


def destination_renew(*, permit: Permit, lease_seconds: float) -> bool:
    """Extend the leases of the permit's slots; False when one of them was taken over (it ran out)."""
    if permit.slot_ids:
        renewed = (
            DestinationSlot.objects.using(DB)
            .filter(pk__in=permit.slot_ids, holder=permit.holder)
            .update(free_at=db_now_plus(lease_seconds))
        )
        if renewed < len(permit.slot_ids):
            return False
    if permit.rate_ids:
        # The used ones too: each stays taken until a second after its answer, which `destination_release`
        # writes; a lease that ran out before the release would let it go sooner.
        renewed = (
            DestinationSlot.objects.using(DB)
            .filter(pk__in=permit.rate_ids, holder=permit.holder)
            .update(free_at=db_now_plus(lease_seconds + RATE_WINDOW_SECONDS))
        )
        if renewed < len(permit.rate_ids):
            return False
    return True


def _hold(name: str, seconds: float, reason: str) -> None:
    """A Retry-After hold: a row of its own (`HoldKind.RETRY_AFTER`) beside any other hold. One still live
    is extended, keeping its start (the screens say since when the destination has been held); one whose
    end passed is over, and this one starts now. Never shortened: a longer end another worker set stays."""
    seconds = min(seconds, settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS)
    if seconds <= 0:
        return
    with transaction.atomic(using=DB):
        # One writer of the destination's Retry-After hold at a time.
        destination_health_locked(name)
        # Episodes whose end passed are closed at their end: the "not ended" index every held? check reads
        # keeps one Retry-After row per destination, not one per episode since the destination began.
        DestinationHold.objects.using(DB).filter(
            destination=name,
            kind=HoldKind.RETRY_AFTER,
            ended_at__isnull=True,
            ends_at__lte=db_now(),
        ).update(ended_at=F("ends_at"), ended_by="its end passed")
        live = (
            DestinationHold.objects.using(DB)
            .live()
            .filter(destination=name, kind=HoldKind.RETRY_AFTER)
        )
        if not live.update(ends_at=Greatest("ends_at", db_now_plus(seconds)), reason=reason[:200]):
            DestinationHold.objects.using(DB).create(
                destination=name,
                kind=HoldKind.RETRY_AFTER,
                reason=reason[:200],
                starts_at=db_now(),
                ends_at=db_now_plus(seconds),
                set_by="the destination (its answer)",
            )


def destination_release(*, permit: Permit) -> None:
    """Give the permit back right after its calls: the concurrency slot at once, each used rate slot one
    second from now, the unused ones at once. A Retry-After among the answers holds the destination."""
    if permit.released:
        return
    permit.released = True
    if permit.retry_after is not None:
        _hold(permit.destination, permit.retry_after, permit.hold_reason)
    used = permit.rate_ids[: permit.requests_made]
    unused = permit.slot_ids + permit.rate_ids[permit.requests_made :]
    if not used and not unused:
        return  # no limits, no slots: building the query alone was a fifth of an empty claim turn's CPU
    slots = DestinationSlot.objects.using(DB).filter(holder=permit.holder)
    if used:
        slots.filter(pk__in=used).update(free_at=db_now_plus(RATE_WINDOW_SECONDS), holder="")
    if unused:
        slots.filter(pk__in=unused).update(free_at=None, holder="")


def destination_set_limits(
    *, name: str, max_concurrency: object, max_requests_per_second: object, actor, reason: str
) -> DestinationHealth:
    """An operator sets the destination's limits (empty = unlimited). Checked first, nothing written on bad
    input (InvalidLimit); the change is a DestinationEvent with the actor and the reason."""
    concurrency = parse_limit(max_concurrency, "Maximum concurrency")
    rate = parse_limit(max_requests_per_second, "Maximum requests per second")
    if not reason.strip():
        raise InvalidLimit("a reason is required to change a destination's limits")
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        before = (health.max_concurrency, health.max_requests_per_second)
        if before == (concurrency, rate):
            return health
        health.max_concurrency, health.max_requests_per_second = concurrency, rate
        health.save(
            using=DB, update_fields=["max_concurrency", "max_requests_per_second", "updated_at"]
        )
        for kind, limit in ((SlotKind.CONCURRENCY, concurrency), (SlotKind.RATE, rate)):
            if limit:
                _ensure_slots(name, kind, limit)
        DestinationEvent.objects.using(DB).create(
            destination=name,
            from_state=health.state,
            to_state=health.state,
            actor=actor,
            actor_label=actor.get_username(),
            action="set_limits",
            reason=(
                f"limits set: concurrency {describe_limit(before[0])} -> {describe_limit(concurrency)}, requests per "
                f"second {describe_limit(before[1])} -> {describe_limit(rate)}; {reason.strip()}"
            )[:2000],
        )
    return health
