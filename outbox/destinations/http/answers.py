"""What an HTTP receiver's answer means for the handoffs it carried: a call that failed before an answer
came (`call_failure`), a single call's or one batch item's answer (`item_result`), a batch answer's items, and
a batch lookup's answer (`batch_lookup_answer`)."""

import json
from collections.abc import Callable

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    NewConnectionError,
    ProtocolError,
    ProxyError,
    ReadTimeoutError,
    SSLError,
)

from outbox.destinations.base import LookupFailed, RemoteTask, remote_task
from outbox.destinations.http.connections import Answer
from outbox.failures import (
    DeliveryResult,
    MalformedReceipt,
    Outgoing,
    classify_status,
    parse_retry_after,
    validate_receipt,
)
from outbox.models import FailureClass
from outbox.redaction import redact_text

# What a call can raise on its way (urllib3's errors and the operating system's): `call_failure` reads them.
CALL_FAILURES = (urllib3.exceptions.HTTPError, OSError)


def call_failure(exc: Exception, *, proxy: str | None) -> DeliveryResult:
    """The failure a POST that raised `exc` stands for: transient when nothing can have reached the receiver,
    uncertain when the request may have been read. `proxy` names the proxy (without credentials)."""
    if isinstance(exc, NewConnectionError):
        # Nothing reached the receiver: safe to try again. (A subclass of ConnectTimeoutError: first.)
        return DeliveryResult.failed(
            FailureClass.TRANSIENT, "connect_failed", redact_text(str(exc))
        )
    if isinstance(exc, ProxyError):
        # The proxy was not reached (urllib3 raises this only before it has connected to the proxy): nothing
        # was sent. A proxy that refuses a CONNECT tunnel is an OSError below: uncertain, the safe side.
        return DeliveryResult.failed(
            FailureClass.TRANSIENT,
            "connect_failed",
            f"proxy {proxy} not reached: {redact_text(str(exc))}",
        )
    if isinstance(exc, ConnectTimeoutError):
        return DeliveryResult.failed(
            FailureClass.TRANSIENT, "connect_timeout", redact_text(str(exc))
        )
    if isinstance(exc, SSLError):
        # TLS refused before the request was written (an expired or untrusted certificate): a failed connect,
        # which the breaker counts. (A TLS handshake that times out comes back as a read timeout: uncertain,
        # the safe side, settled by lookup.)
        return DeliveryResult.failed(
            FailureClass.TRANSIENT, "connect_failed", redact_text(str(exc))
        )
    if isinstance(exc, ReadTimeoutError):
        return DeliveryResult.failed(
            FailureClass.UNCERTAIN,
            "read_timeout",
            f"no answer in time after sending: {type(exc).__name__}",
        )
    if isinstance(exc, ProtocolError):
        return DeliveryResult.failed(
            FailureClass.UNCERTAIN,
            "connection_lost",
            f"connection lost after sending: {type(exc).__name__}",
        )
    return DeliveryResult.failed(FailureClass.UNCERTAIN, "http_error", redact_text(str(exc)))


def item_result(
    status: object,
    body: object,
    retry_after: str | None,
    outgoing: Outgoing,
    latency_ms: int,
    *,
    describe: Callable[[], str],
    date: str | None = None,
) -> DeliveryResult:
    """What one answer (a single call's, or one batch item's) means for its handoff. `describe` words the answer
    for a failure's detail; a delivery has its receipt, and does not pay for the wording."""
    common = {"status_code": status if isinstance(status, int) else None, "latency_ms": latency_ms}
    if status in (200, 201):
        try:
            task_id, created = validate_receipt(body, outgoing)
        except MalformedReceipt as exc:
            return DeliveryResult.failed(
                FailureClass.MALFORMED,
                "malformed_receipt",
                f"HTTP {status} without a valid receipt: {exc}",
                **common,
            )
        return DeliveryResult.ok(task_id=task_id, created=created, receipt=body, **common)
    if not isinstance(status, int):
        return DeliveryResult.failed(
            FailureClass.MALFORMED, "malformed_receipt", "answer without a status", **common
        )
    failure_class, reason_code = classify_status(status)
    return DeliveryResult.failed(
        failure_class,
        reason_code,
        describe(),
        retry_after=parse_retry_after(retry_after, date=date),
        **common,
    )


def single_result(response: Answer, outgoing: Outgoing, latency_ms: int) -> DeliveryResult:
    """What a single call's answer means for its handoff. A success whose body is not strict JSON (a key
    twice, NaN) is a malformed receipt that says why, never a receipt read as the last key's value."""
    try:
        parsed = response.json()
    except ValueError as exc:
        if response.status_code in (200, 201):
            return DeliveryResult.failed(
                FailureClass.MALFORMED,
                "malformed_receipt",
                f"HTTP {response.status_code} without a valid receipt: {exc}",
                status_code=response.status_code,
                latency_ms=latency_ms,
            )
        parsed = None
    return item_result(
        response.status_code,
        parsed,
        response.headers.get("Retry-After"),
        outgoing,
        latency_ms,
        describe=lambda: describe_answer(response),
        date=response.headers.get("Date"),
    )


def answer_failure(response: Answer, latency_ms: int) -> DeliveryResult:
    """A call answered with a status that is not a delivery: its failure, worded and classified, with the
    Retry-After it asks for (a date read against the answer's own Date)."""
    failure_class, reason_code = classify_status(response.status_code)
    return DeliveryResult.failed(
        failure_class,
        reason_code,
        describe_answer(response),
        retry_after=parse_retry_after(
            response.headers.get("Retry-After"), date=response.headers.get("Date")
        ),
        status_code=response.status_code,
        latency_ms=latency_ms,
    )


def batch_failure(response: Answer, count: int, latency_ms: int) -> list[DeliveryResult]:
    """A batch answered with another status than 200: the same failure for each of its `count` items."""
    return [answer_failure(response, latency_ms)] * count


def batch_item_results(
    response: Answer, outgoings: list[Outgoing], latency_ms: int
) -> list[DeliveryResult]:
    """A 200 batch answer's result for each item sent, in order; all malformed without one per item."""
    results, problem = _batch_results(response, len(outgoings))
    if problem:
        return [
            DeliveryResult.failed(
                FailureClass.MALFORMED,
                "malformed_receipt",
                f"batch answer without a result per item: {problem}",
                status_code=200,
                latency_ms=latency_ms,
            )
        ] * len(outgoings)
    return [
        _batch_item_result(item, outgoing, latency_ms)
        for item, outgoing in zip(results, outgoings, strict=True)
    ]


def _batch_results(response: Answer, expected: int) -> tuple[list, str]:
    """The per-item results of a batch answer, or why there are none ("" when fine)."""
    try:
        results = response.json()["results"]
    except (ValueError, KeyError, TypeError) as exc:
        return [], str(exc) or type(exc).__name__
    if not isinstance(results, list) or len(results) != expected:
        return [], "one result per item expected"
    return results, ""


def _batch_item_result(item: object, outgoing: Outgoing, latency_ms: int) -> DeliveryResult:
    fields = item if isinstance(item, dict) else {}
    retry_after = fields.get("retry_after")
    return item_result(
        fields.get("http_status"),
        item,
        str(retry_after) if retry_after else None,
        outgoing,
        latency_ms,
        describe=lambda: redact_text(json.dumps(item)[:500]),
    )


def lookup_refused(message: str, response: Answer) -> LookupFailed:
    """A lookup (one key's, a batch's, a key listing, a work status read) answered with a status that proves
    nothing: `message`, with its status and the Retry-After it asks for (a date read against the answer's own
    Date), so that a 429 or 503 with Retry-After holds the whole destination as a delivery's does (the
    caller's permit). Every kind's lookups are refused through here."""
    return LookupFailed(
        message,
        status_code=response.status_code,
        retry_after=parse_retry_after(
            response.headers.get("Retry-After"), date=response.headers.get("Date")
        ),
    )


def lookup_without_credentials(exc: Exception) -> LookupFailed:
    """No credentials for a lookup (`CREDENTIAL_FAILURES`): its token endpoint's reason and Retry-After travel
    on, as a delivery's result carries them. The API was not called: the receiver was not asked."""
    return LookupFailed(
        str(exc), reason_code=exc.reason_code, retry_after=exc.retry_after, asked=False
    )


def describe_answer(response: Answer) -> str:
    try:
        body = json.dumps(response.json())[:500]
    except ValueError:
        body = response.text[:200]
    return redact_text(f"HTTP {response.status_code}: {body}")


# The http kind's batch lookup answer (`POST /tasks/lookup`): which of the keys asked the receiver has a task
# for, read by the contract. An answer that proves nothing about a key (not 200, no item list, an item that is
# not a task, a task for a key not asked) is `LookupFailed` for the whole request: settlement then knows nothing
# of those keys and asks again later, rather than taking "absent from a broken answer" for "not there".
def batch_lookup_answer(response: Answer, action_keys: list[str]) -> dict[str, RemoteTask | None]:
    """Each key asked: its task, or None when the receiver named it among the keys it has no task for."""
    if response.status_code in (401, 403):
        raise LookupFailed(f"receiver refused the credentials (HTTP {response.status_code})")
    if response.status_code != 200:
        raise lookup_refused(f"batch lookup answered HTTP {response.status_code}", response)
    try:
        document = response.json()
        tasks = [remote_task(item) for item in document["items"]]
        missing = set(document["missing"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LookupFailed(f"batch lookup answer is not a list of tasks: {exc}") from exc
    found = {task.action_key: task for task in tasks}
    asked = set(action_keys)
    if not set(found) <= asked:
        raise LookupFailed("batch lookup answered about keys that were not asked")
    if unanswered := asked - set(found) - missing:
        raise LookupFailed(f"batch lookup said nothing about {len(unanswered)} of the keys asked")
    return {key: found.get(key) for key in action_keys}
