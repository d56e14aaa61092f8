"""The one rule that ties a destination's timeouts to the lease: one call must end within a lease
(`HANDOFF_LEASE_SECONDS`). A call that outlives its lease may pass to another worker while it is out, and
its outcome is then refused by fencing: every call of such a destination is wasted, and at a destination
without idempotency each lost outcome goes to a person. The dispatcher renews the leases of the claims it
still holds before any call that could outlive them, so the claim batch size does not enter the rule.

Checked against each destination's own timeouts (its row's, or the seed's settings) by
`manage.py destinations apply` and `check` and at the dispatcher's start (`registry.destination_problems`).
"""

from typing import NamedTuple

from django.conf import settings

from outbox.destinations.base import Destination


class LeaseRefusal(NamedTuple):
    """Why one call of a destination may outlive its lease: `key`, the configuration key to change."""

    key: str
    detail: str

    def __str__(self) -> str:
        return f"{self.key}: {self.detail}"


def lease_refusal(destination: Destination) -> LeaseRefusal | None:
    """None when one call of the destination (`call_seconds`) ends within a lease; else why not."""
    lease = settings.HANDOFF_LEASE_SECONDS
    if destination.call_seconds < lease:
        return None
    keys = destination.call_seconds_keys
    return LeaseRefusal(
        keys[-1],
        f"one call may take {' + '.join(keys)} = {destination.call_seconds:g} s, not less than the "
        f"lease (HANDOFF_LEASE_SECONDS={lease} s): every call would outlive its claim and its outcome be "
        "refused; lower the timeouts below the lease or lengthen the lease",
    )
