"""The kinds of destination, by the name a configuration gives them (healthchecks' `TRANSPORTS`), and the
destination this process is configured with (`settings.HANDOFF_DESTINATION`, built once).

A new kind is a module of this package with a `Destination` subclass (its `from_config` reads its
configuration), named here."""

import threading

from django.conf import settings

from outbox.destinations.base import Destination
from outbox.destinations.http import HttpDestination
from outbox.destinations.in_process import InProcessDestination

KINDS: dict[str, type[Destination]] = {
    "http": HttpDestination,
    "in_process": InProcessDestination,
}

_configured: Destination | None = None
_configured_lock = threading.Lock()


def destination_from_config(config: dict) -> Destination:
    kind = config.get("kind", "http")
    if kind not in KINDS:
        raise ValueError(f"unknown destination kind {kind!r}")
    return KINDS[kind].from_config({k: v for k, v in config.items() if k != "kind"})


def get_destination() -> Destination:
    """The destination configured in settings.HANDOFF_DESTINATION, built once per process."""
    global _configured
    with _configured_lock:
        if _configured is None:
            _configured = destination_from_config(settings.HANDOFF_DESTINATION)
        return _configured


def reset_destination() -> None:
    global _configured
    with _configured_lock:
        if _configured is not None:
            _configured.close()
        _configured = None
