"""Asking the receiver about one key, as a person's check and a repair do (through the destination's
lookups under its limits, `outbox.services.lookup_limits.lookups_under_limits`)."""

from outbox.destinations import LookupFailed, Lookups, RemoteTask


def lookup_key(destination: Lookups, key: str) -> tuple[RemoteTask | None, str]:
    """(the receiver's task or None, "") or (None, why it could not be asked)."""
    if not destination.supports_lookup:
        return None, "this destination cannot be asked about a key; check at the receiver by hand"
    try:
        return destination.lookup(key), ""
    except LookupFailed as exc:
        return None, str(exc)
