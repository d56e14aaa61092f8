"""The console's actions on one handoff, for the command line: the same service calls as
`console/views/handoff_actions.py`, with the same inputs (a reason, an owner, a confirmed risk), so the same
events are written with the acting user as actor.

`--dry-run` runs the same services in a transaction that is rolled back: the refusal or the move they would
make is reported and nothing is written (a retry is checked, not sent; a reconcile asks the destination what
it holds, as the console's previews do, and records nothing)."""

from django.contrib.auth import get_user_model
from django.db import transaction

from lib.databases import DB
from outbox import services
from outbox.errors import AssigneeNotOperator
from outbox.models import Handoff, HandoffState
from outbox.services.retry_now import handoff_retry_now

S = HandoffState


def _sent(handoff: Handoff, state: str) -> dict:
    """What happened when the handoff was sent again right away (the console's words)."""
    handoff.refresh_from_db()
    if state == S.DELIVERED:
        return {
            "level": "success",
            "text": f"Sent: delivered as receiver task {handoff.destination_id}.",
        }
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
    return {"level": "info", "text": "Queued with the same action key; a worker is sending it."}


def retry(user, handoff: Handoff, options: dict) -> dict:
    kwargs = {
        "handoff_id": handoff.pk,
        "actor": user,
        "reason": options["reason"],
        "confirm_risk": options["confirm_risk"],
    }
    if options["dry_run"]:
        services.handoff_retry(**kwargs)
        return {"level": "info", "text": "Queued with the same action key and sent at once."}
    return _sent(handoff, handoff_retry_now(**kwargs))


def reconcile(user, handoff: Handoff, options: dict) -> dict:
    state = services.handoff_settle(handoff_id=handoff.pk, actor=user, reason=options["reason"])
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


def cancel(user, handoff: Handoff, options: dict) -> dict:
    services.handoff_cancel(handoff_id=handoff.pk, actor=user, reason=options["reason"])
    return {"level": "success", "text": "Cancelled. It will never be sent."}


def assign(user, handoff: Handoff, options: dict) -> dict:
    """`--owner` names the new owner by username ("nobody" for none), where the console posts an id."""
    name = options["owner"]
    owner = None
    if name != "nobody":
        owner = get_user_model().objects.filter(username=name).first()
        if owner is None:
            raise AssigneeNotOperator("the new owner must be an operator of this workspace")
    services.handoff_assign(
        handoff_id=handoff.pk, actor=user, owner=owner, reason=options["reason"]
    )
    return {
        "level": "success",
        "text": f"Assigned to {owner.get_username() if owner else 'nobody'}.",
    }


def acknowledge(user, handoff: Handoff, options: dict) -> dict:
    services.handoff_acknowledge(handoff_id=handoff.pk, actor=user, reason=options["reason"])
    return {"level": "success", "text": f"Acknowledged by {user.get_username()}."}


ACTIONS = {
    "retry": retry,
    "reconcile": reconcile,
    "cancel": cancel,
    "assign": assign,
    "acknowledge": acknowledge,
}


class _RolledBack(Exception):
    def __init__(self, result: dict):
        self.result = result


def previewed(action, user, handoff: Handoff, options: dict) -> dict:
    """The action's result as if done, with everything it wrote rolled back (a refusal is raised as usual)."""
    try:
        with transaction.atomic(using=DB):
            raise _RolledBack(action(user, handoff, options))
    except _RolledBack as done:
        result = done.result
    return {
        **result,
        "dry_run": True,
        "text": f"Dry run, nothing written. Would be: {result['text']}",
    }
