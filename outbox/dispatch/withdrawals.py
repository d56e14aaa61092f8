"""Send-time checks: a handoff whose reason to go has ended is withdrawn at the send step, not sent.

Another app registers a check for the action keys it records (`send_check_register`, from its
`AppConfig.ready`): the incidents side's for its notifications (`incident:`), so that a page whose cause
has ended by the moment it would go out is never sent (docs/incidents.md). The dispatcher asks
`send_withheld` just before each call, with the claim held; a reason means the claim is withdrawn
(`handoff_withdraw`): cancelled, its attempt marked not sent, no call made. The outbox imports no app for
it: the check is a function of the action key.
"""

from collections.abc import Callable

from django.db import transaction

from lib.databases import DB
from outbox.dispatch.claims import Claim
from outbox.dispatch.leases import claim_release_locked
from outbox.models import HandoffState
from outbox.services.transitions import handoff_transition

S = HandoffState

# A check takes the action key and returns why the handoff must not go now ("" : send it).
SendCheck = Callable[[str], str]
_checks: dict[str, SendCheck] = {}


def send_check_register(*, prefix: str, check: SendCheck) -> None:
    """Ask `check` before sending any handoff whose action key starts with `prefix`."""
    _checks[prefix] = check


def send_withheld(action_key: str) -> str:
    """Why the handoff with this key must not be sent now; "" when it goes (or no check applies)."""
    for prefix, check in _checks.items():
        if action_key.startswith(prefix):
            return check(action_key)
    return ""


def handoff_withdraw(*, claim: Claim, reason: str) -> bool:
    """Withdraw a claimed handoff instead of sending it: its attempt is marked not sent (and not counted),
    the handoff cancelled with reason code `withdrawn`. Refused (False) when the claim's lease was taken
    over (fencing): the new holder asks the check itself."""
    with transaction.atomic(using=DB):
        handoff = claim_release_locked(claim, reason, reason=f"not sent: {reason}")
        if handoff is None:
            return False
        handoff_transition(
            handoff,
            S.CANCELLED,
            actor_label=claim.worker,
            reason=f"withdrawn: {reason}",
            reason_code="withdrawn",
        )
    return True
