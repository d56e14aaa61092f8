"""Asking a paused destination at once whether it is back, when a person says it should be (issue 26).

An operator who resumes a destination its breaker paused has usually just fixed it (restarted the receiver,
rotated a credential). Waiting for the next scheduled probe (up to HANDOFF_BREAKER_PROBE_CAP) would leave the
fix unproven and the backlog waiting, so the resume asks the destination right away with a lookup of a key
no handoff has: it creates nothing, and any answer resumes the destination on the spot
(`outbox/services/lookup_limits.py` passes it to the breaker). Without an answer (still down, or a
destination without lookups) the next claim is the probe, as the resume already arranged.

This is a network call: it runs after the resume's transaction, never inside one.
"""

from outbox.destinations import LookupFailed
from outbox.destinations.registry import DestinationUnavailable, destination_named
from outbox.services.lookup_limits import lookups_under_limits

# A key no handoff has: a lookup of it tests the connection and the credentials, and creates nothing.
CONNECTION_TEST_KEY = "handoff-console:connection-test"
# A person waits for this answer on the page: a few seconds for the destination's limits at most.
PROBE_NOW_WAIT_SECONDS = 5.0


def destination_probe_now(*, name: str, asked_by: str) -> str:
    """Ask the destination once now (a lookup of CONNECTION_TEST_KEY under its limits). Returns "" when it
    answered (a destination paused by its breaker is then resumed), or why it could not be asked."""
    try:
        destination = destination_named(name)
    except DestinationUnavailable as exc:
        return str(exc)
    if not destination.supports_lookup:
        return "it cannot be asked without sending something (no lookup)"
    try:
        lookups_under_limits(
            destination, worker=asked_by, wait_seconds=PROBE_NOW_WAIT_SECONDS
        ).lookup(CONNECTION_TEST_KEY)
    except LookupFailed as exc:
        return str(exc)
    return ""
