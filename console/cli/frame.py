"""The console's frame around a handoff action, for the command line: the acting user, the workspace scope
(a handoff outside the user's workspaces does not exist for them), the operator role, and each domain error
turned into the console's words and an exit status.

The refusals say what the console says (`console/views/handoffs.py` `handoff_action`); the exit status
stands for the console's HTTP status (`EXIT_STATUS`)."""

from approvals.errors import ApprovalsError, InvalidPayload
from approvals.selectors import active_user_named, is_operator_of, workspace_ids_for
from outbox.errors import InvalidActionInput, OutboxError, RiskNotConfirmed
from outbox.models import Handoff
from outbox.selectors import handoff_visible
from reconciliation.errors import InvalidRepairInput, ReconciliationError

# The console's answer -> the command's exit status (0 is done; 1 and 2 are Django's and argparse's own).
EXIT_STATUS = {403: 3, 404: 4, 409: 5, 422: 6}
# Nothing was done because the operator has to confirm a risk first (the console asks on the same page).
CONFIRM_EXIT = 7


class Refused(Exception):
    """An action not done: the console's status for it, and its words."""

    def __init__(self, text: str, *, status: int, level: str = "error"):
        super().__init__(text)
        self.text, self.status, self.level = text, status, level

    @property
    def exit_status(self) -> int:
        return CONFIRM_EXIT if self.status == 200 else EXIT_STATUS[self.status]


def acting_user(username: str):
    """The active user named `username`: whom the command acts as. Nobody else, and no inactive account
    (the console signs neither in)."""
    user = active_user_named(username)
    if user is None:
        raise Refused(f"Not allowed: no active user named {username!r}.", status=403)
    return user


def visible_handoff(user, pk: int) -> Handoff:
    """The handoff if it is in one of the user's workspaces; otherwise it does not exist (the console: 404)."""
    handoff = handoff_visible(workspace_ids_for(user), pk)
    if handoff is None:
        raise Refused("no such handoff", status=404)
    return handoff


def require_operator(user, handoff: Handoff) -> None:
    if not is_operator_of(user.pk, handoff.workspace_id):
        raise Refused(
            "Not allowed: handoff actions need the operator role in workspace "
            f"{handoff.workspace_id}. Ask an operator, or an administrator for the role.",
            status=403,
        )


def run_action(action, user, handoff: Handoff, options: dict) -> dict:
    """`action(user, handoff, options)` with the console's reading of its domain errors: the result
    ({"level", "text"}) when done, else Refused with the console's words and status."""
    try:
        return action(user, handoff, options)
    except RiskNotConfirmed as exc:
        raise Refused(
            f"{exc} (again with --confirm-risk to accept)", status=200, level="warning"
        ) from exc
    except InvalidPayload as exc:
        raise Refused("Not done: " + "; ".join(exc.reasons), status=422) from exc
    except (InvalidActionInput, InvalidRepairInput) as exc:
        raise Refused(f"Not done: {exc}.", status=422) from exc
    except (OutboxError, ApprovalsError, ReconciliationError) as exc:
        raise Refused(f"Not done: {exc}.", status=409) from exc
