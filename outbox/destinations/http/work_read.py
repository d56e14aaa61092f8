"""A pulled work status read over HTTP (`work_status.read`, docs/destinations.md "Work status"): the configured
GET of one task, the value at the configured field as answered, or that the task is gone (404, 410). Asked
with the destination's own connections and credentials (`send`, `headers`); LookupFailed when nothing is known.
"""

from collections.abc import Callable

from outbox.destinations.base import Destination, LookupFailed, WorkAnswer
from outbox.destinations.http.answers import (
    CALL_FAILURES,
    describe_answer,
    lookup_refused,
    lookup_without_credentials,
)
from outbox.destinations.http.connections import Answer
from outbox.destinations.idempotency_key.auth import CREDENTIAL_FAILURES
from outbox.destinations.idempotency_key.contract import FieldMissing, NoEntry, SeveralEntries, dig

GONE = (404, 410)


def read_work_over_http(
    destination: Destination,
    send: Callable[[str, str, bytes | None, dict], Answer],
    *,
    receipt_id: str,
    action_key: str,
) -> WorkAnswer:
    """`send(method, path, body, headers)` is the kind's own request; its credentials are
    `destination.config.credentials` (read at each call)."""
    name, source = destination.name, destination.work_status
    read = source.read
    if read is None:
        raise LookupFailed(f"{name} has no work status read configured")
    path = read.path_for(receipt_id=receipt_id, action_key=action_key)
    asked = f"{read.method} {path}"
    try:
        response = send(read.method, path, None, destination.config.credentials.headers())
    except CALL_FAILURES as exc:
        raise LookupFailed(f"{name} not reachable: {type(exc).__name__}") from exc
    except CREDENTIAL_FAILURES as exc:
        # Its token endpoint's Retry-After travels on: the read's permit holds the destination.
        raise lookup_without_credentials(exc) from exc
    if response.status_code in GONE:
        return WorkAnswer(found=False, asked=f"{asked} answered {response.status_code}")
    if not 200 <= response.status_code < 300:
        # A 429 or 503 with Retry-After asks the whole destination to wait: the read's permit holds it.
        raise lookup_refused(
            f"work status read {asked} answered {describe_answer(response)}", response
        )
    try:
        value = dig(response.json(), source.value_at, single=True)
    except (ValueError, FieldMissing, NoEntry, SeveralEntries):
        value = None  # not there, or not JSON: unknown, never guessed
    return WorkAnswer(found=True, value=value, asked=asked)
