"""The destinations a dispatcher cannot serve (`destination_problems`: it cannot be built, a secret it names
is missing here, one call may outlive a lease), each held with its reason while the others are served: a
destination's problem stays its own. The hold is the breaker's pause with no probe
(`outbox/services/breaker.py` `destination_hold`): nothing is claimed for it, its handoffs wait, and it is one
incident (`incidents/causes.py`). Released when a dispatcher finds the problem gone."""

import logging

from outbox.destinations.registry import enabled_destination_names
from outbox.services.breaker import (
    destination_hold,
    destination_release_hold,
    destinations_held_unservable,
)

log = logging.getLogger(__name__)


class Holds:
    """The destinations this process cannot serve, each held with its reason (`destination_hold`: paused,
    no probe, one incident) while the others are served. A hold is written when this process first sees the
    problem (or sees it change) and released when it sees the problem gone, so that two processes that
    disagree (one has the secret) do not pause and resume it in turn."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def start(self, problems: dict[str, str]) -> None:
        """At the start: release the holds this process can serve (left by a process that could not, or by
        this one before a restart with the secret), and hold what it cannot."""
        for name in sorted(destinations_held_unservable() - set(problems)):
            if destination_release_hold(name=name, reason="a dispatcher started that can serve it"):
                log.info("destination %s: hold released, served again", name)
        self.update(problems)

    def update(self, problems: dict[str, str]) -> None:
        for name, problem in sorted(problems.items()):
            if self.seen.get(name) != problem:
                destination_hold(name=name, reason=problem)
                log.error("destination %s held, not served: %s", name, problem)
        for name in sorted(set(self.seen) - set(problems)):
            if destination_release_hold(name=name, reason="its problem is gone; served again"):
                log.info("destination %s: hold released, served again", name)
        self.seen = dict(problems)


def servable_names(problems: dict[str, str], names: list[str] | None = None) -> list[str]:
    """The enabled destinations (`names`, when the caller read them) without a problem: what a dispatcher
    serves."""
    enabled = enabled_destination_names() if names is None else names
    return [name for name in enabled if name not in problems]
