"""An action over every handoff the console's filter matches, as the list's bulk action does it
(`console/views/handoff_bulk.py`): only in the workspaces where the user is an operator, previewed (how many,
up to which id), then applied by the same services to the same filter bounded by that id. `--dry-run` stops
at the preview, as the console's first post does."""

from django.contrib.auth import get_user_model

from approvals.models import Role
from approvals.selectors import workspace_ids_for
from console.cli.frame import Refused
from console.cli.reading import matching
from outbox.errors import AssigneeNotFound, InvalidActionInput
from outbox.services import bulk as bulk_services

VERBS = {"retry": "retried", "reconcile": "reconciled", "assign": "assigned"}


def _verb(action: str) -> str:
    return VERBS.get(action, action)


def handoffs_bulk(user, action: str, data: dict[str, str], options: dict) -> dict:
    operator_ws = workspace_ids_for(user, Role.OPERATOR)
    if not operator_ws:
        raise Refused(
            "Bulk actions need the operator role in a workspace; you have none.", status=403
        )
    handoffs = matching(user, data, operator_ws)
    preview = bulk_services.handoffs_bulk_preview(action=action, matching=handoffs)
    if preview.too_many:
        raise Refused(
            f"More than {bulk_services.BULK_JOB_LIMIT} handoffs match. Narrow the filter first: a bulk "
            "action applies to every match or to none.",
            status=422,
            level="warning",
        )
    if not preview.count:
        return {
            "level": "info",
            "count": 0,
            "text": f"No handoff matching this filter can be {_verb(action)}.",
        }
    if options["dry_run"]:
        return {
            "level": "info",
            "dry_run": True,
            "count": preview.count,
            "upto": preview.upto,
            "text": f"Dry run, nothing written: {preview.count} matching handoffs (ids up to "
            f"{preview.upto}) would be {_verb(action)}"
            + (" in the background." if preview.background else "."),
        }
    return _confirm(user, action, handoffs, preview.upto, options)


def _confirm(user, action: str, handoffs, upto: int, options: dict) -> dict:
    name = options.get("owner") or "nobody"
    owner = None if name == "nobody" else get_user_model().objects.filter(username=name).first()
    try:
        confirmed = bulk_services.handoffs_bulk_confirm(
            action=action,
            matching=handoffs,
            upto=upto,
            actor=user,
            owner=owner,
            reason=options["reason"],
            owner_missing=name != "nobody" and owner is None,
        )
    except AssigneeNotFound as exc:
        raise Refused("Choose an operator to assign to.", status=422) from exc
    except InvalidActionInput as exc:
        raise Refused(f"Nothing was done: {exc}.", status=422) from exc
    if confirmed.job is not None:
        return {
            "level": "info",
            "count": confirmed.total,
            "job": confirmed.job.pk,
            "text": f"{confirmed.total} handoffs: running in the background (bulk job {confirmed.job.pk}).",
        }
    result = confirmed.result
    text = f"{_verb(action).capitalize()} {result.done} of {result.total} matching handoffs."
    if action == "retry" and result.done:
        text += " The dispatcher sends them with their same action keys."
    return {
        "level": "warning" if result.skipped else "success",
        "count": result.total,
        "done": result.done,
        "skipped": dict(sorted(result.skipped.items())),
        "text": text,
    }
