"""Running a previewed replay: each item does what its preview said, through the same services as a
person's single action, each in its own transaction, and records what it did.

- already there: settled by lookup (`handoff_settle` asks the receiver again and records the task it
  holds); nothing is sent;
- missing: sent again with the same action key (`handoff_retry`; an uncertain one through `handoff_settle`,
  which finds the key missing and makes it due); the dispatcher sends it; its case held by an operator, it is
  queued behind the hold instead (its own result, not counted as sent), sent once the hold ends;
- cannot be asked, or there with another payload: left for a person, as the preview said;
- nothing to replay: already delivered, or nothing to do (on its way, or closed), said as such.
A key whose answer changed since the preview is recorded as such, never acted on blindly: a settle that
finds the task gone leaves the handoff as settlement decides, and the item says so. A settle that learnt
nothing (the receiver could not be asked) is skipped, and says that, not that the answer changed.
"""

from concurrent.futures import ThreadPoolExecutor

from django.db import transaction
from django.db.models import Q

from incidents.models import ACTED_ON, Replay, ReplayItem, ReplayOutcome, ReplayState, ReplayVerdict
from incidents.services.incidents import incident_event
from incidents.services.replay_preview import (
    CHUNK,
    in_own_connection,
    record_progress,
    replay_enqueue,
    replay_preview_run,
    threads_allowed,
)
from lib.databases import DB
from outbox.clock import DbNow
from outbox.errors import OutboxError
from outbox.models import CaseHold, Handoff, HandoffState
from outbox.models.states import DeliveredCode
from outbox.services.operator import handoff_retry
from outbox.settlement.asked import handoff_settle
from reconciliation.errors import ReconciliationError

STALLED_SECONDS = 120
# Items done at once on PostgreSQL (each a settle or a retry of its own handoff).
ITEMS_AT_ONCE = 4


class ReplayNotConfirmable(ReconciliationError):
    """The replay is not waiting for confirmation (still previewing, or already run)."""


def replay_confirm(*, replay_id: int, actor) -> Replay:
    """The person confirms the preview: the run is queued (a background job)."""
    with transaction.atomic(using=DB):
        replay = Replay.objects.using(DB).select_for_update(no_key=True).get(pk=replay_id)
        if not replay.can_move_to(ReplayState.RUNNING):
            raise ReplayNotConfirmable(
                f"replay {replay.pk} is {replay.get_state_display().lower()}: nothing to confirm"
            )
        Replay.objects.using(DB).filter(pk=replay.pk).update(
            state=ReplayState.RUNNING, confirmed_by=actor, updated_at=DbNow()
        )
        if replay.incident_id is not None:
            incident_event(
                replay.incident, "replay_started", actor=actor, note=f"replay {replay.pk}"
            )
        replay_enqueue("incidents.tasks.replay_run", replay.pk)
    return Replay.objects.using(DB).get(pk=replay_id)


def _due_or_held(handoff_id: int, *, before: str = "") -> tuple[str, str]:
    """What a retried (or settled-missing) item now waits for: its turn (sent again), or, its case held, the
    hold's release (queued, not counted as sent: nothing goes out until the release). A retry while held is
    queued behind the hold, as a person's single retry is (docs/console.md, "hold / resume"): the note names
    who holds it, since and until when, so the replay's result says so."""
    hold = (
        CaseHold.objects.using(DB)
        .filter(pk__in=Handoff.objects.using(DB).filter(pk=handoff_id).values("case_hold_id"))
        .first()
    )
    if hold is None:
        return ReplayOutcome.SENT, before + "due to be sent with the same key"
    until = f"until {hold.ends_at:%Y-%m-%d %H:%M} UTC" if hold.ends_at else "until resumed"
    return ReplayOutcome.QUEUED, (
        f"{before}queued with the same key behind the hold of {hold.what} by {hold.set_by} since "
        f"{hold.created_at:%Y-%m-%d %H:%M} UTC, {until} ({hold.reason}): sent once resumed"
    )[:500]


def _settled(state: str, before: str, handoff_id: int) -> tuple[str, str]:
    if state == HandoffState.DELIVERED:
        return ReplayOutcome.SETTLED, "delivered: the receiver's task recorded, nothing sent"
    if state == HandoffState.PENDING:
        return _due_or_held(handoff_id, before="the receiver had no task: ")
    if state == before:
        # Not "changed": a lookup that failed (a dropped connection, the destination's limits) learnt nothing.
        return ReplayOutcome.SKIPPED, (
            f"still {state}, nothing sent: the receiver could not be asked now, or its answer no longer "
            "matches the preview (the handoff's history says which)"
        )
    return ReplayOutcome.CHANGED, f"now {state}: the receiver's answer changed since the preview"


def _settle(handoff_id: int, actor, reason: str) -> tuple[str, str]:
    before = Handoff.objects.using(DB).values_list("state", flat=True).get(pk=handoff_id)
    state = handoff_settle(
        handoff_id=handoff_id,
        actor=actor,
        reason=reason,
        delivered_code=DeliveredCode.SETTLED_BY_REPLAY,
    )
    return _settled(state, before, handoff_id)


def _send_again(item: ReplayItem, actor, reason: str) -> tuple[str, str]:
    handoff = Handoff.objects.using(DB).get(pk=item.handoff_id)
    if handoff.state == HandoffState.UNCERTAIN:
        return _settle(handoff.pk, actor, reason)
    if handoff.state != HandoffState.NEEDS_ATTENTION:
        return ReplayOutcome.SKIPPED, f"now {handoff.state}: moved since the preview"
    # The preview asked the receiver: the key is not there, so the risk a retry asks to confirm is known.
    handoff_retry(
        handoff_id=handoff.pk, actor=actor, reason=reason, confirm_risk=handoff.outcome_unknown
    )
    return _due_or_held(handoff.pk)


def _nothing_to_do(item: ReplayItem) -> tuple[str, str]:
    state = Handoff.objects.using(DB).filter(pk=item.handoff_id).values_list("state", flat=True)
    if state.first() == HandoffState.DELIVERED:
        return ReplayOutcome.ALREADY_DELIVERED, "delivered before the replay: nothing sent"
    return ReplayOutcome.NOTHING, item.note


def _apply(item: ReplayItem, actor, replay_id: int) -> tuple[str, str]:
    reason = f"replay {replay_id}: {item.get_verdict_display()}"
    if item.verdict == ReplayVerdict.NOTHING_TO_DO:
        return _nothing_to_do(item)
    if item.verdict not in ACTED_ON:
        return ReplayOutcome.LEFT, item.note or item.get_verdict_display()
    try:
        if item.verdict == ReplayVerdict.PRESENT:
            return _settle(item.handoff_id, actor, reason)
        return _send_again(item, actor, reason)
    except (OutboxError, Handoff.DoesNotExist) as exc:
        return ReplayOutcome.SKIPPED, str(exc)[:500] or type(exc).__name__


def _do(item: ReplayItem, actor, replay_id: int) -> None:
    item.outcome, item.outcome_note = _apply(item, actor, replay_id)
    item.state_after = (
        Handoff.objects.using(DB).filter(pk=item.handoff_id).values_list("state", flat=True).first()
        or ""
    )
    item.save(using=DB, update_fields=["outcome", "outcome_note", "state_after"])


def _do_all(items: list[ReplayItem], replay: Replay) -> None:
    """The items of a chunk, each in its own transactions: a few at once where `threads_allowed` (each item
    is another handoff, so they never wait for each other), else one after another."""
    if len(items) < 2 or not threads_allowed():
        for item in items:
            _do(item, replay.confirmed_by, replay.pk)
        return
    with ThreadPoolExecutor(max_workers=ITEMS_AT_ONCE) as pool:
        futures = [
            pool.submit(in_own_connection, _do, item, replay.confirmed_by, replay.pk)
            for item in items
        ]
        for future in futures:
            future.result()


def replay_run(*, replay_id: int, chunk: int = CHUNK) -> Replay:
    """Do every confirmed item not done yet, a chunk at a time, writing results and progress after each
    chunk. Runs again safely: it continues with the items still without a result."""
    replay = Replay.objects.using(DB).select_related("confirmed_by").get(pk=replay_id)
    while replay.state == ReplayState.RUNNING:
        items = list(
            ReplayItem.objects.using(DB)
            .filter(replay=replay, outcome="")
            .order_by("position")[:chunk]
        )
        _do_all(items, replay)
        done = not items
        record_progress(replay, "outcome", ReplayState.DONE, "finished_at", done=done)
        if done and replay.incident_id is not None:
            words = ", ".join(f"{label}: {n}" for _, label, n in replay.outcome_rows() if n)
            incident_event(replay.incident, "replay_done", note=f"replay {replay.pk}: {words}")
    return replay


def replays_resume() -> int:
    """Continue the replays whose wake-up was lost or whose worker died (not moved for a while, on the
    database clock); returns how many. Each is claimed by a conditional update first: of two sweeps, one
    continues it."""
    stalled = Replay.objects.using(DB).filter(
        Q(state=ReplayState.PREVIEWING) | Q(state=ReplayState.RUNNING),
        updated_at__lt=DbNow(-STALLED_SECONDS),
    )
    resumed = 0
    for pk, state in list(stalled.values_list("pk", "state")):
        if not stalled.filter(pk=pk, state=state).update(updated_at=DbNow()):
            continue
        if state == ReplayState.PREVIEWING:
            replay_preview_run(replay_id=pk)
        else:
            replay_run(replay_id=pk)
        resumed += 1
    return resumed
