"""An operator's retry sent at once, so that the operator sees the real result.

It is the one write that delivers: above the dispatcher, which every other module of this package sits below.
So the package's `__init__` does not import it (that would make the dispatcher's own imports a cycle):
`from outbox.services.retry_now import handoff_retry_now`."""

from outbox.destinations import Destination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.services.operator import handoff_retry


def handoff_retry_now(
    *,
    handoff_id: int,
    actor,
    reason: str = "",
    confirm_risk: bool = False,
    destination: Destination | None = None,
) -> str:
    """An operator's retry (same action key), sent at once (to the handoff's own destination unless one is
    given); returns the handoff's state afterwards."""
    handoff_retry(handoff_id=handoff_id, actor=actor, reason=reason, confirm_risk=confirm_risk)
    return handoff_deliver(handoff_id=handoff_id, destination=destination)
