"""What an operator should do next with a handoff, in plain words, and which actions the console offers.

Kept out of templates so that the advice for each state can be read, and tested, in one place.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db import connections

from lib.databases import DB
from lib.request_memo import RequestMemo
from outbox.destinations import DestinationUnavailable, destination_named
from outbox.destinations.registry import destination_from_row
from outbox.destinations.smtp.destination import is_message_id
from outbox.models import (
    NEEDS_PERSON_STATES,
    OPEN_STATES,
    DestinationConfig,
    FailureClass,
    Handoff,
    HandoffState,
    HoldKind,
)

S = HandoffState
F = FailureClass

# Which handoffs each bulk action considers (the services still check every row).
BULK_ELIGIBLE_STATES: dict[str, tuple[str, ...]] = {
    "retry": (S.NEEDS_ATTENTION, S.PENDING),
    "reconcile": tuple(NEEDS_PERSON_STATES),
    "assign": tuple(OPEN_STATES),
    "cancel": (S.PENDING, S.NEEDS_ATTENTION),
    "acknowledge": (S.NEEDS_ATTENTION,),
}


@dataclass(frozen=True)
class Guidance:
    headline: str
    detail: str
    recommended: str = ""
    avoid: tuple[str, ...] = field(default_factory=tuple)


# A list of fifty handoffs asks each one's destination whether it replays: within one request (a page, an
# htmx swap) the answer is kept per destination, so a page reads each destination's row once, not once a row
# (tests/console/test_query_counts_flat.py), and a table reads all its rows' destinations in one query first
# (`read_contracts_of`). Outside a request (dispatchers, commands) it is read each time.
_contracts = RequestMemo("replays")
# Middleware: the destinations' replay contract read at most once per destination and request.
contracts_read_once_per_request = _contracts.middleware


def _replays_same_key(name: str) -> bool:
    return _contracts.get(name, lambda: _read_replays_same_key(name))


def _read_replays_same_key(name: str) -> bool:
    try:
        return destination_named(name).replays_same_key
    except DestinationUnavailable:
        return False


def read_contracts_of(handoffs: Iterable[Handoff]) -> None:
    """Within a request, the replay contract of every destination the rows' advice will ask for (an outcome
    unknown asks it: `retry_is_risky`) read in one query, not once per destination (issue 40). Outside a
    request nothing is kept, and nothing is read."""
    names = _contracts.missing(h.destination for h in handoffs if h.outcome_unknown)
    if not names:
        return
    rows = _destination_rows(names)
    for name in names:
        _contracts.get(name, lambda name=name: _replays_in_row(name, rows.get(name)))


def _destination_rows(names: list[str]) -> dict[str, tuple]:
    """Each named destination's row as `destination_row_statement` reads one (kind, enabled, configuration as
    stored), by name; a name without a row is absent."""
    query = (
        DestinationConfig.objects.using(DB)
        .filter(name__in=names)
        .values_list("name", "kind", "enabled", "config")
        .query
    )
    sql, params = query.get_compiler(DB).as_sql()
    with connections[DB].cursor() as cursor:
        cursor.execute(sql, params)
        return {name: (kind, enabled, config) for name, kind, enabled, config in cursor.fetchall()}


def _replays_in_row(name: str, row: tuple | None) -> bool:
    try:
        return destination_from_row(name, row).replays_same_key
    except DestinationUnavailable:
        return False


def resend_is_safe(handoff: Handoff) -> bool:
    """Its destination's contract says a repeat with the same key and body answers the original (the IETF
    Idempotency-Key draft's replay): sending again cannot make a second effect, whatever the last outcome."""
    return _replays_same_key(handoff.destination)


def retry_is_risky(handoff: Handoff) -> bool:
    """Sending again may create a second effect: the last outcome is unknown, and the destination does not
    replay the original answer to a repeat with the same key."""
    return handoff.outcome_unknown and not resend_is_safe(handoff)


def available_actions(
    handoff: Handoff, findings: Sequence = (), *, destination_held: bool = False
) -> list[str]:
    """The manual actions that make sense for the handoff's state and its open findings, safest first.
    `destination_held`: its destination takes no call now (paused, in a window, under a Retry-After hold), so
    "Run now" could not send it sooner and is not offered."""
    actions = _state_actions(handoff)
    if destination_held and "run_now" in actions:
        actions.remove("run_now")
    if findings or handoff.awaits_receiver_check:
        actions.insert(0, "repair")
    if "reconcile" not in actions and not handoff.with_dispatcher:
        # A read of the receiver; it sends nothing, so it is offered wherever a task may exist.
        actions.insert(0, "reconcile_now")
    # A later step of a workflow is neither cancelled nor corrected alone: the workflow is compensated.
    alone = {"cancel": handoff.cancellable_alone, "correct": handoff.correctable_alone}
    return [action for action in actions if alone.get(action, True)]


def _uncertain_actions(handoff: Handoff) -> list[str]:
    # At a destination that replays the same key, sending again is the safe way to learn the outcome.
    if retry_is_risky(handoff):
        return ["reconcile", "assign", "retry"]
    return ["retry", "reconcile", "assign"]


def _state_actions(handoff: Handoff) -> list[str]:
    state = handoff.state
    if state == S.PENDING:
        return ["run_now", "assign", "cancel"] if handoff.in_backoff else ["assign", "cancel"]
    if state == S.IN_FLIGHT:
        return ["assign"]
    if state == S.UNCERTAIN:
        return _uncertain_actions(handoff)
    if state == S.NEEDS_ATTENTION:
        actions = [] if handoff.acknowledged_at else ["acknowledge"]
        if retry_is_risky(handoff) or handoff.failure_class == F.CONFLICT:
            actions += ["reconcile", "correct", "assign", "cancel", "retry"]
        elif handoff.failure_class == F.PERMANENT:
            # No retry: the same payload is refused the same way (the guidance says so).
            actions += ["correct", "cancel", "assign", "reconcile"]
        else:
            actions += ["retry", "reconcile", "assign", "correct", "cancel"]
        return actions
    return []


def _finding_guidance(findings: Sequence) -> Guidance:
    first = findings[0]
    kinds = ", ".join(f.get_kind_display().lower() for f in findings)
    return Guidance(
        f"Reconciliation found a problem: {kinds}.",
        f"{first.next_action} When it is repaired, record the repair here (what was done, the evidence, the "
        "receiver's task id if one was re-created); the finding closes and later runs will not reopen it.",
        recommended="repair",
        avoid=("retry",),
    )


def _held_guidance(holds) -> Guidance:
    """A pending handoff whose destination is held: every live hold and the next scheduled in the words of
    `outbox/hold_lines.py` (the destination page's), then what it means for this handoff."""
    advice = ""
    if holds.has(HoldKind.CREDENTIAL):
        advice = (
            " The receiver refused our credentials: Rotate or restore the signing secret with the receiver's "
            "owners; the next probe then ends that hold."
        )
    return Guidance(
        f"Waiting: destination {holds.name} is held.",
        f"Holds: {holds.text}.{advice} It is sent by itself once no hold is live; no attempt or retry time "
        "of this handoff is spent meanwhile.",
        avoid=("retry",),
    )


def _closed_guidance(handoff: Handoff) -> Guidance:
    if handoff.state == S.DELIVERED and is_message_id(handoff.destination_id):
        return Guidance(
            "Delivered. Nothing to do here.",
            f"The mail server accepted message {handoff.destination_id} for {handoff.action_key}; sending "
            "it was the work, so nothing more happens to it.",
        )
    if handoff.state == S.DELIVERED and handoff.task_seen is False:
        return Guidance(
            "Delivered, but the receiver has no task for this key now.",
            f"The receiver created task {handoff.destination_id or '(unknown id)'} for {handoff.action_key}, and "
            f"since said it has none ({handoff.task_checked_by}, {handoff.task_checked_at:%Y-%m-%d %H:%M} UTC). "
            "Nothing is sent by itself. If no manual repair below accounts for it, find out at the receiver "
            "what happened to the task and record one.",
        )
    if handoff.state == S.DELIVERED:
        return Guidance(
            "Delivered. Nothing to do here.",
            f"The receiver created task {handoff.destination_id or '(unknown id)'} for {handoff.action_key}; "
            "“What the receiver has said” shows when it last confirmed the task. It does not "
            "mean the onboarding work is finished.",
        )
    return {
        S.SUPERSEDED: Guidance(
            "Replaced by a correction. Nothing to do here.",
            "A corrected revision of the request got its own approval and its own action key.",
        ),
        S.CANCELLED: Guidance(
            "Cancelled. Nothing to do here.", "It will never be sent. The history says who and why."
        ),
        S.OBSERVED: Guidance(
            "Recorded in observe-only mode. Nothing was sent.",
            "The workflow does not send to the receiver in this workspace yet.",
        ),
    }[handoff.state]


def _moving_guidance(handoff: Handoff) -> Guidance:
    if handoff.state == S.IN_FLIGHT:
        return Guidance(
            "Being sent right now. Wait.",
            "A worker holds it. If the worker stops answering, the handoff becomes uncertain when its lease "
            "runs out and is then settled by asking the receiver.",
            avoid=("retry",),
        )
    if handoff.state == S.UNCERTAIN and not retry_is_risky(handoff):
        return _replay_guidance(handoff, "")
    if handoff.state == S.UNCERTAIN:
        return Guidance(
            "Outcome unknown: reconcile first.",
            "The receiver may or may not have created the task. The next step is the system's: it asks the "
            f"receiver about {handoff.action_key} by itself and settles it, or hands it to a person when the "
            "receiver cannot be asked. \u201cReconcile\u201d asks now, without sending anything. Do not send it "
            "again before reconciling.",
            recommended="reconcile",
            avoid=("retry",),
        )
    if handoff.in_backoff:
        return Guidance(
            "Waiting to retry after a temporary failure.",
            f"The last attempt failed ({handoff.reason_code or 'temporary error'}). The dispatcher tries again "
            "by itself. \u201cRun now\u201d sends it at once with the same action key; that is safe, the "
            "receiver will not create a second task.",
            recommended="run_now",
        )
    return Guidance(
        "Queued for delivery. Nothing to do.", "The dispatcher sends it within seconds."
    )


def _replay_guidance(handoff: Handoff, ack: str) -> Guidance:
    """An unknown outcome at a destination that replays the original answer to a repeat with the same key."""
    return Guidance(
        "Outcome unknown: send again with the same key (safe).",
        f"{handoff.destination} answers a repeat with the same key and body with the original answer (the "
        "Idempotency-Key draft's replay), so \u201cRetry\u201d sends {key} again and learns the outcome "
        "without a second effect. \u201cReconcile\u201d asks without sending, where the destination can be "
        f"asked.{ack}".replace("{key}", handoff.action_key),
        recommended="retry",
    )


def _attention_guidance(handoff: Handoff) -> Guidance:
    ack = (
        ""
        if handoff.acknowledged_at
        else " Acknowledge it first so others see that someone is on it."
    )
    key, fc = handoff.action_key, handoff.failure_class
    if fc in (F.PERMANENT, F.CONFLICT) and not handoff.correctable_alone:
        return Guidance(
            "The receiver refused this step: compensate the workflow.",
            f"The steps before {handoff.step or 'this one'} were delivered. Correcting would run the workflow "
            "again from its first step under new keys and do them twice; sending the same payload again fails "
            f"the same way ({handoff.reason_code}). Compensate the workflow (its delivered steps are undone, "
            f"latest first), then submit a new request with the right data.{ack}",
            recommended="compensate",
            avoid=("retry",),
        )
    if handoff.outcome_unknown and not retry_is_risky(handoff):
        return _replay_guidance(handoff, ack)
    if handoff.outcome_unknown:
        return Guidance(
            "Outcome unknown and not settled automatically: reconcile.",
            f"\u201cReconcile\u201d asks the receiver whether it has a task for {key}. If the receiver cannot be "
            "asked, check there by hand for this key, then \u201cRecord a manual repair\u201d with what you found: "
            f"its task id (the handoff becomes delivered) or that it has none (sent again with the same key).{ack}",
            recommended="reconcile",
            avoid=("retry",),
        )
    return _failure_guidance(handoff, ack)


def _failure_guidance(handoff: Handoff, ack: str) -> Guidance:
    """A failure whose outcome is known: the receiver refused the content, the key or our credentials, or
    retries ran out."""
    fc = handoff.failure_class
    if fc == F.PERMANENT:
        return Guidance(
            "The receiver rejected the content: correct it.",
            f"Sending the same payload again fails the same way ({handoff.reason_code}). \u201cCorrect\u201d creates "
            "a new revision of the request that needs a new approval and gets a new action key; or cancel with a "
            f"reason.{ack}",
            recommended="correct",
            avoid=("retry",),
        )
    if fc == F.CONFLICT:
        return Guidance(
            "The receiver holds a different task under this key: do not send again.",
            "Compare the receiver's task with this payload. If this payload is right, correct the request "
            f"(new revision, new key); otherwise cancel with a reason.{ack}",
            recommended="correct",
            avoid=("retry",),
        )
    if fc == F.CREDENTIAL:
        return Guidance(
            "The receiver refused our credentials: fix them, then retry.",
            "Rotate or restore the signing secret with the receiver's owners. Then \u201cRetry\u201d sends again "
            f"with the same action key, which is safe.{ack}",
            recommended="retry",
        )
    return Guidance(
        "Retries ran out: check the receiver, then retry.",
        f"The receiver kept failing ({handoff.reason_code or 'temporary errors'}). Once it answers again, "
        f"\u201cRetry\u201d sends with the same action key: safe, the receiver will not create a second task.{ack}",
        recommended="retry",
    )


def next_step(handoff: Handoff, findings: Sequence = (), *, holds=None) -> Guidance:
    """The safest next action for the handoff, in words an operator understands at 02:00. The one source
    of this advice: the console shows it and the alerts quote it.

    An open reconciliation finding comes first: a handoff the receiver disagrees with is never "fine",
    whatever its own state says. `findings` are the live findings of its key (kind label, next action);
    `holds` its destination's holds (`outbox.hold_lines.DestinationHolds`): while one is live (an operator's
    pause or window, the breaker's or a credential hold, a Retry-After hold) a pending handoff waits for them.
    """
    if findings:
        return _finding_guidance(findings)
    if holds is not None and holds.held and handoff.state == S.PENDING:
        return _held_guidance(holds)
    if not handoff.is_open:
        return _closed_guidance(handoff)
    if handoff.state == S.NEEDS_ATTENTION:
        return _attention_guidance(handoff)
    return _moving_guidance(handoff)


def advice_text(handoff: Handoff) -> str:
    """The same advice as one line of text, for alerts."""
    guidance = next_step(handoff)
    return f"{guidance.headline} {guidance.detail}"
