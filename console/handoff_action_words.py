"""One handoff action, done and worded once for the web and the command line: the console's views
(`console/views/handoff_actions.py`) and `manage.py handoffs` (`console/cli/single.py`) call these, so that
the same service call writes the same events and both say the same sentence about its result."""

from console.waiting_status import sent_at_release
from outbox import services
from outbox.destinations.smtp.destination import is_message_id
from outbox.hold_lines import destination_holds_now
from outbox.models import Handoff, HandoffState
from outbox.services.case_holds import case_hold, case_resume
from outbox.services.retry_now import handoff_retry_now

S = HandoffState


def sent_words(handoff: Handoff, state: str) -> dict:
    """What happened when the handoff was sent again right away."""
    handoff.refresh_from_db()
    if state == S.DELIVERED:
        found = handoff.destination_id or ""
        what = "message" if is_message_id(found) else "receiver task"
        return {"level": "success", "text": f"Sent: delivered as {what} {found}."}
    failure = f"({handoff.failure_class}: {handoff.reason_code})"
    if state == S.PENDING and handoff.attempts and handoff.failure_class:
        return {
            "level": "warning",
            "text": f"Sent, and it failed again {failure}. It will be retried automatically.",
        }
    if state == S.NEEDS_ATTENTION:
        return {
            "level": "error",
            "text": f"Sent, and it failed again {failure}. It still needs attention.",
        }
    if state == S.UNCERTAIN:
        return {
            "level": "warning",
            "text": "Sent, but the outcome is unknown again. Reconcile before anything else.",
        }
    return _queued_words(handoff, state)


def _queued_words(handoff: Handoff, state: str) -> dict:
    """Not sent right away: why, and when it will be."""
    if handoff.is_held:
        return {
            "level": "info",
            "text": "Queued with the same action key; its case is held, so it is sent once resumed.",
        }
    if state == S.PENDING and (holds := destination_holds_now(handoff.destination)).held:
        # Refused a permit: nothing was sent, and no worker sends it before the last hold ends.
        return {
            "level": "info",
            "text": f"Queued with the same action key, not sent: its destination is held ({holds.text}). "
            "It is sent once the holds end.",
        }
    return {"level": "info", "text": "Queued with the same action key; a worker is sending it."}


def retry(actor, handoff: Handoff, *, reason: str, confirm_risk: bool) -> dict:
    """Sent at once, so that the operator reads the actual result instead of "queued"."""
    state = handoff_retry_now(
        handoff_id=handoff.pk, actor=actor, reason=reason, confirm_risk=confirm_risk
    )
    return sent_words(handoff, state)


def reconcile(actor, handoff: Handoff, *, reason: str) -> dict:
    state = services.handoff_settle(handoff_id=handoff.pk, actor=actor, reason=reason)
    latest = handoff.events.order_by("-at", "-id").values_list("reason", flat=True).first() or ""
    if state == S.DELIVERED:
        return {"level": "success", "text": f"Reconciled: {latest}. Delivered."}
    if state == S.PENDING:
        return {"level": "info", "text": f"Reconciled: {latest}. Queued to send with the same key."}
    if state in (S.UNCERTAIN, S.NEEDS_ATTENTION):
        return {"level": "warning", "text": f"Reconciled: {latest}."}
    return {
        "level": "info",
        "text": f"Nothing to reconcile: the handoff is {state.replace('_', ' ')}.",
    }


def cancel(actor, handoff: Handoff, *, reason: str) -> dict:
    services.handoff_cancel(handoff_id=handoff.pk, actor=actor, reason=reason)
    return {"level": "success", "text": "Cancelled. It will never be sent."}


def assign(actor, handoff: Handoff, *, owner, reason: str) -> dict:
    services.handoff_assign(handoff_id=handoff.pk, actor=actor, owner=owner, reason=reason)
    return {
        "level": "success",
        "text": f"Assigned to {owner.get_username() if owner else 'nobody'}.",
    }


def acknowledge(actor, handoff: Handoff, *, reason: str) -> dict:
    services.handoff_acknowledge(handoff_id=handoff.pk, actor=actor, reason=reason)
    return {"level": "success", "text": f"Acknowledged by {actor.get_username()}."}


# What a hold covers unless the operator asks for more, on the handoff page's form (the box unticked) and
# for `manage.py handoffs hold` (no --whole-case) alike: only the step the operator looked at. Holding its
# whole workflow instance stops steps the operator has not seen; holding too little is seen at once and
# widened with a second hold, while holding too much silently delays other steps' sends.
HOLD_WHOLE_CASE_BY_DEFAULT = False


def hold(actor, handoff: Handoff, *, reason: str, until, whole_case: bool) -> dict:
    """Hold the handoff, or its whole workflow instance, until `until` or until resumed."""
    held = case_hold(
        handoff_id=handoff.pk, actor=actor, reason=reason, until=until, whole_case=whole_case
    )
    end = f"until {held.ends_at:%Y-%m-%d %H:%M} UTC" if held.ends_at else "until resumed"
    return {
        "level": "success",
        "text": f"Held {end}: {held.what}. Nothing of it is sent while it is held; its keys and "
        "approval are unchanged.",
    }


def resume(actor, handoff: Handoff, *, reason: str) -> dict:
    """End the hold of the handoff's case: what is left of it is sent, each under its own key; a handoff
    needing attention is not (the resume decides nothing for it: a retry sends it), nor a case whose rows
    all settled while it was held (nothing was left: the sweep would have ended the hold)."""
    ended, settled = case_resume(handoff_id=handoff.pk, actor=actor, reason=reason)
    handoff.refresh_from_db()
    if settled:
        return {
            "level": "info",
            "text": f"Resumed: {ended.what}. Nothing of it was left to send ({settled}): the hold "
            "ended and nothing is sent.",
        }
    if handoff.needs_attention:
        return {
            "level": "success",
            "text": f"Resumed: {ended.what}. {handoff.action_key} still needs attention: nothing is "
            "sent until an operator retries it (same key), corrects or cancels it.",
        }
    if handoff.outcome_unknown:
        return {
            "level": "success",
            "text": f"Resumed: {ended.what}. {handoff.action_key}: "
            f"{sent_at_release(handoff, 'now')}.",
        }
    return {
        "level": "success",
        "text": f"Resumed: {ended.what}. What is left of it is sent under the same keys; delivered "
        "steps are not sent again.",
    }
