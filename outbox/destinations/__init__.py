"""How a handoff reaches a receiver: the only package that knows.

`base` holds the interface every kind offers (`Destination`, the `Lookups` it answers, `RemoteTask`);
one module per kind says how its receiver is reached (`http`, `in_process`); `registry` names the kinds
and builds each destination from its row (`destination_named`).
"""

from outbox.destinations.base import (
    BatchRefused,
    Destination,
    LookupFailed,
    Lookups,
    RemoteTask,
)
from outbox.destinations.http.destination import HttpDestination
from outbox.destinations.in_process.destination import InProcessDestination
from outbox.destinations.registry import (
    DestinationUnavailable,
    destination_named,
    enabled_destinations,
    get_destination,
    reset_destination,
)

__all__ = [
    "BatchRefused",
    "Destination",
    "DestinationUnavailable",
    "HttpDestination",
    "InProcessDestination",
    "LookupFailed",
    "Lookups",
    "RemoteTask",
    "destination_named",
    "enabled_destinations",
    "get_destination",
    "reset_destination",
]
