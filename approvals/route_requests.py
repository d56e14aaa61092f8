"""What each routed step of a workflow will send: its request rendered from the payload being approved.

The approval page shows these renderings and posts their hash; the decision binds to it and stores them
(`Approval.requests`), and each step's handoff freezes its own (`Handoff.request`), never rendered again
(docs/destinations.md, "Request mapping"). A step without a mapping sends the approved payload as it is.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from lib.request_mapping import MappingRefused, render_request, requests_hash
from outbox.destinations import DestinationUnavailable, destination_named
from outbox.destinations.http.mapped_request import MappedParts
from outbox.destinations.idempotency_key.destination import IdempotencyKeyHttpDestination
from outbox.destinations.registry import default_destination_name
from outbox.redaction import redact


@dataclass(frozen=True)
class RouteRequest:
    step: str
    destination: str
    # {"body", "path", "query", "headers"} as rendered; None: the step maps none (the payload as it is).
    request: dict | None

    def stored(self) -> dict:
        return {"step": self.step, "destination": self.destination, "request": self.request}


def route_requests(payload: dict, steps: Sequence[dict]) -> list[RouteRequest]:
    """Each step's request rendered from `payload`, in step order; MappingRefused naming the place
    (`steps[1].request.body.name: client_name is missing`) when one cannot render."""
    default = default_destination_name() if steps else ""
    return [
        RouteRequest(
            step=step["name"],
            destination=step.get("destination") or default,
            request=render_request(step["request"], payload, where=f"steps[{index}].request")
            if step.get("request") is not None
            else None,
        )
        for index, step in enumerate(steps)
    ]


def route_requests_hash(routes: Sequence[RouteRequest]) -> str:
    return requests_hash([route.stored() for route in routes])


def frozen_requests(stored: object) -> dict[str, dict]:
    """A decision's stored renderings as the outbox freezes them: step name -> request (mapped steps only)."""
    return {
        entry["step"]: entry["request"]
        for entry in stored or []
        if isinstance(entry, dict) and entry.get("request") is not None
    }


def route_call(route: RouteRequest) -> str:
    """The call the destination will get, in words ("POST /v1/accounts/Acme"), where its kind says; ""."""
    try:
        destination = destination_named(route.destination)
    except DestinationUnavailable:
        return ""
    if not isinstance(destination, IdempotencyKeyHttpDestination):
        return ""
    create = destination.config.create
    try:
        return f"{create.method} {MappedParts.of(route.request).path(create.path)}"
    except ValueError:
        return f"{create.method} {create.path}"


def mapping_problems_over(payload: dict, steps: Sequence[dict]) -> list[str]:
    """Why the steps' mappings cannot render over `payload` (empty: they all render)."""
    try:
        route_requests(payload, steps)
    except MappingRefused as exc:
        return [str(exc)]
    return []


@dataclass(frozen=True)
class RoutesShown:
    """What the approval page shows of the routes: each route redacted, the hash its form posts, or why the
    requests cannot be rendered (approving is then refused with the same words)."""

    routes: list[dict]
    requests_hash: str
    problem: str = ""


def routes_shown(payload: dict, steps: Sequence[dict]) -> RoutesShown:
    try:
        routes = route_requests(payload, steps)
    except MappingRefused as exc:
        return RoutesShown(routes=[], requests_hash="", problem=str(exc))
    return RoutesShown(
        routes=[
            {
                "step": route.step,
                "destination": route.destination,
                "call": route_call(route),
                "request": redact(route.request) if route.request is not None else None,
            }
            for route in routes
        ],
        requests_hash=route_requests_hash(routes),
    )
