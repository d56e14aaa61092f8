"""The console's actions on one handoff, for the command line: the same actions and words as the
console's (`console/handoff_action_words.py`), with the same inputs (a reason, an owner, a confirmed risk),
so the same events are written with the acting user as actor.

`--dry-run` runs the same services in a transaction that is rolled back: the refusal or the move they would
make is reported and nothing is written (a retry is checked, not sent; a reconcile asks the destination what
it holds, as the console's previews do, and records nothing)."""

from django.contrib.auth import get_user_model
from django.db import transaction

from console import handoff_action_words as action_words
from lib.databases import DB
from outbox import services
from outbox.errors import AssigneeNotOperator
from outbox.models import Handoff
from outbox.services.case_holds import hold_end_from_text


def retry(user, handoff: Handoff, options: dict) -> dict:
    if options["dry_run"]:
        services.handoff_retry(
            handoff_id=handoff.pk,
            actor=user,
            reason=options["reason"],
            confirm_risk=options["confirm_risk"],
        )
        handoff.refresh_from_db()
        if handoff.is_held:
            # Not sent at once: queued while its case is held, in the words of the real retry.
            return action_words.sent_words(handoff, handoff.state)
        return {"level": "info", "text": "Queued with the same action key and sent at once."}
    return action_words.retry(
        user, handoff, reason=options["reason"], confirm_risk=options["confirm_risk"]
    )


def reconcile(user, handoff: Handoff, options: dict) -> dict:
    return action_words.reconcile(user, handoff, reason=options["reason"])


def cancel(user, handoff: Handoff, options: dict) -> dict:
    return action_words.cancel(user, handoff, reason=options["reason"])


def assign(user, handoff: Handoff, options: dict) -> dict:
    """`--owner` names the new owner by username ("nobody" for none), where the console posts an id."""
    name = options["owner"]
    owner = None
    if name != "nobody":
        owner = get_user_model().objects.filter(username=name).first()
        if owner is None:
            raise AssigneeNotOperator("the new owner must be an operator of this workspace")
    return action_words.assign(user, handoff, owner=owner, reason=options["reason"])


def acknowledge(user, handoff: Handoff, options: dict) -> dict:
    return action_words.acknowledge(user, handoff, reason=options["reason"])


def hold(user, handoff: Handoff, options: dict) -> dict:
    """`--until` and `--whole-case` as the console's form posts them."""
    return action_words.hold(
        user,
        handoff,
        reason=options["reason"],
        until=hold_end_from_text(options.get("until") or ""),
        whole_case=options.get("whole_case", False),
    )


def resume(user, handoff: Handoff, options: dict) -> dict:
    return action_words.resume(user, handoff, reason=options["reason"])


# Actions on one case only: never over a filter's matches.
CASE_ACTIONS = ("hold", "resume")

ACTIONS = {
    "retry": retry,
    "reconcile": reconcile,
    "cancel": cancel,
    "assign": assign,
    "acknowledge": acknowledge,
    "hold": hold,
    "resume": resume,
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
