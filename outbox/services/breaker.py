"""The circuit breaker of a destination: every change of a destination's health.

An outage or a refused credential is the destination's problem, not each handoff's. After
`HANDOFF_BREAKER_THRESHOLD` consecutive connection/5xx failures across handoffs (or
`HANDOFF_BREAKER_CREDENTIAL_THRESHOLD` consecutive 401/403s, or 401/403s over a share of the recent calls:
refusals that persist, `outbox/services/credential_share.py`) the destination is paused, a hold of its own
(`DestinationHold`, until a probe succeeds, set by "the breaker"): no handoff is claimed for it, so none
spends an attempt or its retry window on a receiver that cannot answer. One worker at a time makes a
single probe call on a backoff schedule; the first success resumes the destination and ends its hold.
Pauses and resumes are events; alerts read them. A dispatcher that cannot serve a destination at all (it
cannot be built, a secret is missing, a call may outlive a lease) holds it with an unservable hold and no
probe, until a dispatcher finds it servable (`destination_hold`). What the answers say (the verdict, the
thresholds, the probe delays) is `outbox/breaker_rules.py`.

Recovery does not wait for the schedule when there is evidence sooner (issue 26): any answer from the
destination to a lookup or a key listing (settlement, a person's reconcile, a reconciliation run, an
operator's resume, which asks at once: `outbox/services/recovery.py`) resumes it on the spot
(`destination_answered`, called by `outbox/services/lookup_limits.py`), and wakes its dispatchers. While it is
paused, the maintenance pass may spend the probe on a lookup of one uncertain outcome instead of a delivery
(`destination_settlement_admission`): a lookup creates nothing, and its answer both settles that handoff and
resumes the destination.
"""

from datetime import datetime
from typing import NamedTuple

from django.db import IntegrityError, transaction
from django.db.models import Exists, F

from lib.databases import DB, rows_compiled_once
from outbox.breaker_rules import (
    Admission,
    BreakerSeen,
    Verdict,
    pause_threshold,
    pause_words,
    probe_delay,
    verdict_of,
)
from outbox.clock import db_now, db_now_plus, db_time
from outbox.dispatch.wakeups import wake_dispatcher_on_commit
from outbox.failures import DeliveryResult
from outbox.models import (
    DestinationEvent,
    DestinationHealth,
    DestinationHold,
    DestinationState,
    Handoff,
    HandoffState,
    HoldKind,
    PauseReason,
)
from outbox.models.holds import BREAKER_KINDS
from outbox.services.credential_share import credential_share_refused

D = DestinationState


def destination_health_get_or_create(name: str) -> DestinationHealth:
    """The destination's row, written (with the configured default limits) the first time it is needed."""
    health = DestinationHealth.objects.using(DB).filter(name=name).first()
    if health is not None:
        return health
    try:
        with transaction.atomic(using=DB):
            return DestinationHealth.objects.using(DB).create(name=name)
    except IntegrityError:  # created by another worker meanwhile
        return DestinationHealth.objects.using(DB).get(name=name)


def destination_health_locked(name: str) -> DestinationHealth:
    """The destination's row, locked for the rest of the caller's transaction (created first if new), its
    `state`, `pause_reason` and `paused_at` set from the breaker's live hold: the holds say whether the
    breaker pauses it, the columns are only written (for the previous release's dispatchers), so that a
    save here makes them agree with the holds again."""
    health = (
        DestinationHealth.objects.using(DB)
        .select_for_update(no_key=True)
        .get(pk=destination_health_get_or_create(name).pk)
    )
    # The holds in a statement of their own, after the lock: in READ COMMITTED a statement that waited for
    # the lock re-reads the locked row, but a subquery of it (an annotation) keeps the snapshot from before
    # the wait, so a pause or resume committed by the worker it waited for would be unseen, and made twice.
    health.breaker_read()
    health.state = D.PAUSED if health.breaker_kind else D.ACTIVE
    health.pause_reason = _column_reason(health.breaker_pause_reason)
    health.paused_at = health.breaker_since
    return health


def _column_reason(reason: str) -> str:
    """What the old `pause_reason` column gets for a pause (only written, for the previous release's
    dispatchers): a reason that release knows, so a token endpoint's outage is its `unreachable`; the hold
    says `token_endpoint` (`DestinationHold.pause_reason`), and every reader of this release reads the hold."""
    return PauseReason.UNREACHABLE if reason == PauseReason.TOKEN_ENDPOINT else reason


def _breaker_holds(name: str):
    """The destination's breaker holds live now, as a condition on its `DestinationHealth` row."""
    return Exists(DestinationHold.objects.of_breaker().filter(destination=name))


def destination_admit(*, name: str, seen: BreakerSeen | None = None) -> Admission:
    """May this worker claim handoffs for the destination now, and how many. `seen`: the breaker the
    caller has just read (with the destination's limits), a moment before it would be read here; read here
    otherwise. Either read may be overtaken by another worker's pause; the probe slot itself is taken by a
    conditional update."""
    paused, made = (
        seen
        or DestinationHealth.objects.using(DB)
        .filter(name=name)
        .annotate(paused=_breaker_holds(name))
        .values_list("paused", "probes", named=True)
        .first()
        or BreakerSeen(False, 0)
    )
    if not paused:
        return Admission.OPEN
    return Admission.PROBE if _take_probe_slot(name, made) else Admission.PAUSED


def _take_probe_slot(name: str, made: int) -> bool:
    # The probe slot is taken by a conditional update on the database clock (and on the probe count read by
    # the caller), so that one worker probes. The next probe is set on the slower schedule here: the probe's
    # own failure, once recorded, sets it by its cause (`_count_failures`); a prober that dies leaves this.
    return bool(
        DestinationHealth.objects.using(DB)
        .filter(_breaker_holds(name), name=name, probes=made, next_probe_at__lte=db_now())
        .update(probes=F("probes") + 1, next_probe_at=db_now_plus(probe_delay(made + 1)))
    )


class _SettlementSeen(NamedTuple):
    """The destination as the settlement's admission reads it: paused by its breaker, its probes, and whether
    an operator's pause or window is live."""

    paused: bool
    probes: int
    in_window: bool


def _settlement_seen(name: str) -> _SettlementSeen | None:
    # Compiled once per destination (`rows_compiled_once`): read at every maintenance turn, the query compiled by
    # the ORM each time was a quarter of a settling dispatcher's CPU (docs/benchmarks.md, the settlement section).
    rows = rows_compiled_once(
        ("settlement admission", name),
        lambda: (
            DestinationHealth.objects.using(DB)
            .with_window()
            .filter(name=name)
            .annotate(paused=_breaker_holds(name))
            .order_by()
            .values_list(*_SettlementSeen._fields)[:1]
        ),
    )
    if not rows:
        return None
    paused, probes, in_window = rows[0]
    return _SettlementSeen(bool(paused), probes, bool(in_window))


def destination_settlement_admission(*, name: str) -> Admission:
    """May the maintenance pass ask the destination about its uncertain outcomes now. OPEN: neither paused by
    its breaker nor in an operator's pause or window (a Retry-After hold refuses the lookups' permits by
    itself). PROBE: paused by its breaker, its probe is due and an uncertain outcome waits: this pass makes the
    probe as one lookup (and asks about the rest once that answer has resumed it). PAUSED: not now."""
    seen = _settlement_seen(name)
    if seen is None:
        return Admission.OPEN
    if seen.in_window:
        return Admission.PAUSED  # an operator said no calls: not even a probe
    if not seen.paused:
        return Admission.OPEN
    waiting = (
        Handoff.objects.using(DB).filter(state=HandoffState.UNCERTAIN, destination=name).exists()
    )
    return Admission.PROBE if waiting and _take_probe_slot(name, seen.probes) else Admission.PAUSED


def destination_answered(*, name: str, what: str) -> bool:
    """The destination answered `what` (a lookup, a key listing): it is reachable and takes our credentials.
    A destination paused by its breaker resumes now, without waiting for its next probe, and its
    dispatchers are woken to drain it. Returns whether it was resumed. The caller knows it was paused (the
    breaker as read with its permit): a healthy destination's answers cost nothing here."""
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        if health.state != D.PAUSED or health.pause_reason == PauseReason.UNSERVABLE:
            # Resumed meanwhile (by a probe, or by another answer), or held by a dispatcher that cannot
            # serve it: an answer does not make a missing secret appear (`destination_hold`).
            return False
        _resume(
            health,
            f"{what} answered after {health.probes} probe(s); resumed without waiting for the next probe",
        )
        health.save(using=DB)
        wake_dispatcher_on_commit(DB, destination=name)
    return True


def destination_record_results(
    *, name: str, results: list[DeliveryResult], seen_healthy: bool | None = None
) -> str:
    """Count the results against the destination; pause or resume it. Returns its state afterwards.
    `seen_healthy`: the caller has just read (with the outcomes' write) that the destination is not paused by
    its breaker (no live hold of its) and has no failure streak; read here otherwise."""
    verdict = verdict_of(results)
    if not verdict.succeeded and not verdict.failures:
        return ""
    if _healthy_answered(name, verdict, seen_healthy):
        # The common case, after every batch: a healthy destination answered. Nothing to reset, no lock taken.
        return D.ACTIVE
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        if verdict.succeeded:
            _resume(health)
        if verdict.failures:
            _count_failures(health, verdict)
        if verdict.refused and health.state == D.ACTIVE:
            _hold_for_share(health, verdict)
        health.save(using=DB)
    return health.state


def _healthy_answered(name: str, verdict: Verdict, seen_healthy: bool | None) -> bool:
    """Answers with no failure and no refusal, from a destination not paused with no failure streak."""
    if verdict.failures or verdict.refused:
        return False
    if seen_healthy is not None:
        return seen_healthy
    return (
        DestinationHealth.objects.using(DB)
        .filter(~_breaker_holds(name), name=name, consecutive_failures=0)
        .exists()
    )


def _move(health: DestinationHealth, to_state: str, reason: str) -> None:
    if not health.can_move_to(to_state):
        return
    DestinationEvent.objects.using(DB).create(
        destination=health.name, from_state=health.state, to_state=to_state, reason=reason
    )
    health.state = to_state


def _resume(health: DestinationHealth, reason: str = "") -> None:
    if health.state == D.PAUSED:
        reason = reason or f"a call succeeded after {health.probes} probe(s); resumed"
        _move(health, D.ACTIVE, reason)
        _end_breaker_holds(health.name, reason)
    health.consecutive_failures, health.failing_since, health.pause_reason = 0, None, ""
    health.paused_at, health.next_probe_at, health.probes, health.last_error = None, None, 0, ""


def _end_breaker_holds(name: str, reason: str) -> None:
    """End the breaker's live holds (its pause, a credential or an unservable hold); no other hold."""
    DestinationHold.objects.using(DB).filter(
        destination=name, kind__in=BREAKER_KINDS, ended_at__isnull=True
    ).update(ended_at=db_now(), ended_by=f"the breaker: {reason}"[:150])


def _add_breaker_hold(
    name: str,
    kind: str,
    reason: str,
    *,
    pause_reason: str,
    until_probe: bool,
    by: str,
    starts_at: datetime,
) -> None:
    DestinationHold.objects.using(DB).create(
        destination=name,
        kind=kind,
        reason=reason[:200],
        pause_reason=pause_reason,
        starts_at=starts_at,
        until_probe=until_probe,
        set_by=by,
    )


def _pause(health: DestinationHealth, reason: str, why: str, reason_code: str) -> None:
    """The breaker pauses the destination: an event, its probe schedule, and its hold until a probe
    succeeds (a credential hold for refused credentials, else the breaker's pause)."""
    _move(health, D.PAUSED, why)
    # One reading of the database's clock for the hold's start and the pause's: the incident quotes the
    # hold's, the destination's page the pause's, and two readings could fall either side of a second.
    since = db_time(DB)
    health.pause_reason = _column_reason(reason)
    health.paused_at = since
    health.probes = 0
    health.next_probe_at = db_now_plus(probe_delay(0, reason_code))
    kind = HoldKind.CREDENTIAL if reason == PauseReason.CREDENTIAL else HoldKind.BREAKER
    _add_breaker_hold(
        health.name,
        kind,
        why,
        pause_reason=reason,
        until_probe=True,
        by="the breaker",
        starts_at=since,
    )


def _hold_for_share(health: DestinationHealth, verdict: Verdict) -> None:
    """Refused credentials over a share of the recent calls hold the destination, however few were in a
    row (`outbox/services/credential_share.py`)."""
    share = credential_share_refused(name=health.name)
    if share is not None:
        health.last_error = verdict.refused_detail
        _pause(health, PauseReason.CREDENTIAL, f"{share}: {verdict.refused_detail}", "")


def _count_failures(health: DestinationHealth, verdict: Verdict) -> None:
    if health.consecutive_failures == 0:
        health.failing_since = db_now()
    health.consecutive_failures += verdict.failures
    health.last_error = verdict.detail
    threshold = pause_threshold(verdict.reason)
    if health.state == D.ACTIVE and health.consecutive_failures >= threshold:
        why = f"{health.consecutive_failures} consecutive failure(s): {verdict.detail}"
        _pause(health, verdict.reason, pause_words(verdict.reason_code, why), verdict.reason_code)
    elif health.state == D.PAUSED:
        # A probe failed: the next one by its cause (sooner for a receiver that is restarting or waits for
        # its database) instead of the slower schedule its slot was taken with.
        health.next_probe_at = db_now_plus(probe_delay(health.probes, verdict.reason_code))


def destination_resume(*, name: str, actor_label: str) -> str:
    """An operator lets the destination be tried again at once (after fixing a credential, say)."""
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        if health.state == D.PAUSED:
            # The next claim is a probe: the destination resumes only when a call really succeeds.
            health.next_probe_at = db_now()
            health.save(using=DB, update_fields=["next_probe_at", "updated_at"])
            DestinationEvent.objects.using(DB).create(
                destination=name,
                from_state=D.PAUSED,
                to_state=D.PAUSED,
                reason=f"{actor_label} asked for a probe now",
            )
    return health.state


def destination_hold(*, name: str, reason: str) -> bool:
    """Pause the destination as unservable (`PauseReason.UNSERVABLE`), `reason` as its last error: nothing
    is claimed or probed for it, its handoffs wait, and its pause is one incident
    (`incidents/causes.py`). Returns whether this changed anything (a hold with the same reason
    is left as it is, so that its incident stays one)."""
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        held = health.state == D.PAUSED and health.pause_reason == PauseReason.UNSERVABLE
        if held and health.last_error == reason:
            return False
        if health.state == D.PAUSED:
            DestinationEvent.objects.using(DB).create(
                destination=name, from_state=D.PAUSED, to_state=D.PAUSED, reason=reason
            )
        else:
            _move(health, D.PAUSED, reason)
        if not held:
            # An outage or credential pause gives way to this hold: no probe while it cannot be served.
            _end_breaker_holds(name, "a dispatcher cannot serve it")
            since = db_time(DB)
            health.pause_reason, health.paused_at, health.probes = (
                PauseReason.UNSERVABLE,
                since,
                0,
            )
            _add_breaker_hold(
                name,
                HoldKind.UNSERVABLE,
                reason,
                pause_reason=PauseReason.UNSERVABLE,
                until_probe=False,
                by="a dispatcher",
                starts_at=since,
            )
        else:
            DestinationHold.objects.using(DB).filter(
                destination=name, kind=HoldKind.UNSERVABLE, ended_at__isnull=True
            ).update(reason=reason[:200])
        health.next_probe_at, health.last_error = None, reason
        health.save(using=DB)
    return True


def destination_release_hold(*, name: str, reason: str) -> bool:
    """End an unservable hold (`destination_hold`): the destination is active again and its dispatchers are
    woken to drain it. Returns whether it was held."""
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        if health.pause_reason != PauseReason.UNSERVABLE:
            return False
        _resume(health, reason)
        health.save(using=DB)
        wake_dispatcher_on_commit(DB, destination=name)
    return True


def destinations_held_unservable() -> set[str]:
    """The destinations held as unservable now (their live unservable hold)."""
    return set(
        DestinationHold.objects.using(DB)
        .of_breaker()
        .filter(kind=HoldKind.UNSERVABLE)
        .values_list("destination", flat=True)
    )
