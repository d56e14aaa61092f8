"""How a handoff reaches a receiver. The only module that knows.

A destination offers `deliver`, `lookup` and `list_keys`, and declares whether it honours the
idempotency key and whether it can be asked about a key. Everything else in the product (the
dispatcher, settlement, reconciliation) works through this interface.
"""

import ipaddress
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlencode, urlsplit
from urllib.request import getproxies_environment, proxy_bypass_environment

import urllib3
from django.conf import settings
from urllib3.exceptions import (
    ConnectTimeoutError,
    NewConnectionError,
    ProtocolError,
    ProxyError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.util import parse_url

from outbox.failures import (
    DeliveryResult,
    MalformedReceipt,
    Outgoing,
    check_storable,
    classify_status,
    parse_retry_after,
    validate_receipt,
)
from outbox.models import FailureClass
from outbox.payloads import canonical_json
from outbox.redaction import redact_text
from outbox.retry import RetryPolicy
from outbox.signing import signed_headers


@dataclass(frozen=True)
class RemoteTask:
    action_key: str
    task_id: str
    payload_hash: str
    # The work's state as the receiver reports it (open, in_progress, done, failed); "" when not reported.
    status: str = ""


class LookupFailed(Exception):
    """The receiver could not be asked (network, credentials): nothing is known."""


class BatchRefused(Exception):
    """The receiver refused a batch call as too large (HTTP 413) before reading it: nothing was created. The
    destination sends one call per handoff for a while (`batching()` is False); the caller gives the claims back."""


# How long a destination that refused a batch as too large gets one call per handoff instead.
BATCH_REFUSED_SECONDS = 600.0


class Destination:
    name = "receiver"
    supports_idempotency = True
    supports_lookup = True
    supports_batch = False
    retry_policy = RetryPolicy()
    # The longest one call can take (connect + read timeout): what a lease must outlast.
    call_seconds = 0.0

    def deliver(self, outgoing: Outgoing) -> DeliveryResult:
        raise NotImplementedError

    def deliver_batch(self, outgoings: list[Outgoing]) -> list[DeliveryResult]:
        """One result per item, in order. Destinations that declare `supports_batch` do it in one call."""
        return [self.deliver(outgoing) for outgoing in outgoings]

    def batching(self) -> bool:
        """Whether a claim batch goes in one call now (declared, and not refused as too large lately)."""
        return self.supports_batch

    def lookup(self, action_key: str) -> RemoteTask | None:
        """The receiver's task for the key, None when it has none; LookupFailed when unknown."""
        raise NotImplementedError

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def describe(self) -> str:
        """Where handoffs of this destination go, for the people watching them."""
        return f"{self.name} (in process)"


@dataclass
class InProcessDestination(Destination):
    """Calls the receiver's services directly. For fast tests and the embedded demo only.

    `lose_ack_for` names action keys whose acknowledgement is lost once after the receiver has
    committed: the fault the acceptance scenario injects.
    """

    lose_ack_for: set[str] = field(default_factory=set)
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    name: str = "receiver"
    supports_idempotency: bool = True
    supports_lookup: bool = True

    def deliver(self, outgoing: Outgoing) -> DeliveryResult:
        from delivery import services
        from delivery.errors import ActionKeyConflict, InvalidTaskPayload

        try:
            outcome = services.task_create_idempotent(
                action_key=outgoing.action_key, payload=outgoing.payload
            )
        except ActionKeyConflict as exc:
            return DeliveryResult.failed(
                FailureClass.CONFLICT, "key_conflict", str(exc), status_code=409
            )
        except InvalidTaskPayload as exc:
            return DeliveryResult.failed(
                FailureClass.PERMANENT, "payload_invalid", str(exc), status_code=422
            )
        if outgoing.action_key in self.lose_ack_for:
            self.lose_ack_for.discard(outgoing.action_key)
            return DeliveryResult.failed(
                FailureClass.UNCERTAIN,
                "response_lost",
                "acknowledgement lost after the receiver committed",
            )
        receipt = services.task_as_receipt(outcome)
        try:
            task_id, created = validate_receipt(receipt, outgoing)
        except MalformedReceipt as exc:
            return DeliveryResult.failed(FailureClass.MALFORMED, "malformed_receipt", str(exc))
        return DeliveryResult.ok(
            task_id=task_id, created=created, status_code=201 if created else 200, receipt=receipt
        )

    def lookup(self, action_key: str) -> RemoteTask | None:
        from delivery import services
        from delivery.errors import TaskNotFound

        try:
            task = services.task_get(action_key=action_key)
        except TaskNotFound:
            return None
        return RemoteTask(
            action_key=task.action_key,
            task_id=str(task.task_id),
            payload_hash=task.payload_hash,
            status=task.status,
        )

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        from delivery import services

        return [_remote_task(item) for item in services.task_list_keys(after=after, limit=limit)]


@dataclass(frozen=True)
class Answer:
    """A receiver's answer, read whole."""

    status_code: int
    headers: object  # case-insensitive (urllib3's HTTPHeaderDict)
    content: bytes

    def json(self):
        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url`, read as curl and requests read it (`HTTP_PROXY`,
    `HTTPS_PROXY`, `NO_PROXY`, upper or lower case), or None for a direct connection. A receiver on this
    machine (localhost, a loopback address) is always called directly, as Go's HTTP client does: a proxy
    set for the way out must not carry a local receiver's calls (the demo's, the tests', the bench's)."""
    proxies = getproxies_environment()
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme)
    if (
        not proxy
        or _on_this_machine(parts.hostname or "")
        or proxy_bypass_environment(parts.netloc, proxies)
    ):
        return None
    return proxy


def _on_this_machine(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Direct:
    """Keep-alive connections straight to the receiver; requests name a path."""

    def __init__(self, base_url: str, options: dict):
        self.pool = urllib3.connection_from_url(base_url, **options)
        self.prefix = urlsplit(base_url).path

    def urlopen(self, method: str, path: str, **kw):
        return self.pool.urlopen(method, f"{self.prefix}{path}", **kw)

    def close(self) -> None:
        self.pool.close()


def without_credentials(url: str) -> str:
    """`url` without its user and password: what may be shown, stored or logged."""
    return str(parse_url(url)._replace(auth=None))


class _Proxied:
    """Keep-alive connections through an HTTP proxy: a plain request goes to the proxy in absolute form, an
    HTTPS one through a CONNECT tunnel (urllib3's ProxyManager does both). A user and password in the proxy's
    URL become its Proxy-Authorization header, as curl and requests send it (urllib3 does not)."""

    def __init__(self, base_url: str, proxy: str, options: dict):
        auth = parse_url(proxy).auth
        headers = urllib3.make_headers(proxy_basic_auth=unquote(auth)) if auth else None
        self.manager = urllib3.ProxyManager(
            without_credentials(proxy), proxy_headers=headers, num_pools=1, **options
        )
        self.prefix = base_url

    def urlopen(self, method: str, path: str, **kw):
        return self.manager.urlopen(method, f"{self.prefix}{path}", **kw)

    def close(self) -> None:
        self.manager.clear()


class HttpDestination(Destination):
    """A receiver reached over its signed HTTP API with a pooled client."""

    def __init__(
        self,
        *,
        url: str,
        name: str = "receiver",
        connect_timeout: float = 2.0,
        read_timeout: float = 5.0,
        supports_idempotency: bool = True,
        supports_lookup: bool = True,
        supports_batch: bool = False,
        retry: dict | None = None,
        signing_secret: str | None = None,
        max_connections: int = 8,
        **_ignored,
    ):
        self.base_url = url.rstrip("/")
        self.name = name
        self.call_seconds = connect_timeout + read_timeout
        self.supports_idempotency = supports_idempotency
        self.supports_lookup = supports_lookup
        self.supports_batch = supports_batch
        self.retry_policy = RetryPolicy.from_config(retry)
        self.signing_secret = signing_secret
        # One pool of keep-alive connections, shared by the threads that call (urllib3's pools are thread-safe).
        # A connection the receiver closed while idle is noticed and replaced before a request is written on it.
        # urllib3 rather than httpx here: the same pooled keep-alive HTTP at about half the client CPU per
        # call, which on a shared machine is CPU the receiver gets (docs/benchmarks.md).
        self._pool_options = {
            "maxsize": max_connections,
            "block": False,
            "retries": False,
            "timeout": urllib3.Timeout(connect=connect_timeout, read=read_timeout),
        }
        # An egress proxy named in the environment is honoured (NO_PROXY for receivers reached directly);
        # read once, when the destination is built. `proxy` is what may be shown: no credentials.
        self._proxy_url = proxy_for(self.base_url)
        self.proxy = without_credentials(self._proxy_url) if self._proxy_url else None
        self._pool = self._connections()
        self._batch_refused_until = 0.0  # monotonic

    def describe(self) -> str:
        return f"{self.name} at {self.base_url}"

    def batching(self) -> bool:
        return self.supports_batch and time.monotonic() >= self._batch_refused_until

    def _connections(self) -> "_Direct | _Proxied":
        if self._proxy_url:
            return _Proxied(self.base_url, self._proxy_url, self._pool_options)
        return _Direct(self.base_url, self._pool_options)

    def close(self) -> None:
        """Close the pooled connections. The destination stays usable: a fresh pool opens connections again."""
        pool, self._pool = self._pool, self._connections()
        pool.close()

    def _signed(self, body: str) -> dict[str, str]:
        return signed_headers(body, secret=self.signing_secret)

    def _request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> "Answer":
        response = self._pool.urlopen(
            method,
            path,
            body=body,
            headers=headers,
            retries=False,
            redirect=False,
            preload_content=True,
        )
        return Answer(status_code=response.status, headers=response.headers, content=response.data)

    def _post(
        self, path: str, body: str, extra_headers: dict | None = None
    ) -> tuple["Answer | None", DeliveryResult | None, int]:
        """The answer, or the failure that stands for every item sent, and the latency in ms."""
        headers = {
            **self._signed(body),
            "Content-Type": "application/json",
            **(extra_headers or {}),
        }
        started = time.monotonic()
        try:
            response = self._request("POST", path, body.encode(), headers)
        except NewConnectionError as exc:
            # Nothing reached the receiver: safe to try again. (A subclass of ConnectTimeoutError: first.)
            failure = DeliveryResult.failed(
                FailureClass.TRANSIENT, "connect_failed", redact_text(str(exc))
            )
        except ProxyError as exc:
            # The proxy was not reached (urllib3 raises this only before it has connected to the proxy): nothing
            # was sent. A proxy that refuses a CONNECT tunnel is an OSError below: uncertain, the safe side.
            failure = DeliveryResult.failed(
                FailureClass.TRANSIENT,
                "connect_failed",
                f"proxy {self.proxy} not reached: {redact_text(str(exc))}",
            )
        except ConnectTimeoutError as exc:
            failure = DeliveryResult.failed(
                FailureClass.TRANSIENT, "connect_timeout", redact_text(str(exc))
            )
        except SSLError as exc:
            # TLS refused before the request was written (an expired or untrusted certificate): a failed connect,
            # which the breaker counts. (A TLS handshake that times out comes back as a read timeout: uncertain,
            # the safe side, settled by lookup.)
            failure = DeliveryResult.failed(
                FailureClass.TRANSIENT, "connect_failed", redact_text(str(exc))
            )
        except ReadTimeoutError as exc:
            failure = DeliveryResult.failed(
                FailureClass.UNCERTAIN,
                "read_timeout",
                f"no answer in time after sending: {type(exc).__name__}",
            )
        except ProtocolError as exc:
            failure = DeliveryResult.failed(
                FailureClass.UNCERTAIN,
                "connection_lost",
                f"connection lost after sending: {type(exc).__name__}",
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            failure = DeliveryResult.failed(
                FailureClass.UNCERTAIN, "http_error", redact_text(str(exc))
            )
        else:
            return response, None, int((time.monotonic() - started) * 1000)
        return None, failure, int((time.monotonic() - started) * 1000)

    def deliver(self, outgoing: Outgoing) -> DeliveryResult:
        body = canonical_json({"action_key": outgoing.action_key, "payload": outgoing.payload})
        response, failure, latency_ms = self._post(
            "/tasks", body, {"Idempotency-Key": outgoing.action_key}
        )
        if failure is not None:
            return failure
        try:
            parsed = response.json()
        except ValueError:
            parsed = None
        return _item_result(
            response.status_code,
            parsed,
            response.headers.get("Retry-After"),
            outgoing,
            latency_ms,
            describe=lambda: _describe(response),
        )

    def deliver_batch(self, outgoings: list[Outgoing]) -> list[DeliveryResult]:
        if not self.supports_batch or len(outgoings) < 2:
            return super().deliver_batch(outgoings)
        body = canonical_json(
            {"items": [{"action_key": o.action_key, "payload": o.payload} for o in outgoings]}
        )
        response, failure, latency_ms = self._post("/tasks/batch", body)
        if failure is not None:
            return [failure] * len(outgoings)
        if response.status_code == 413:
            # Too many or too large for one call, and nothing read. Single calls from here would be requests the
            # caller's permit does not cover: the caller gives the claims back, and the next batches go one
            # call per handoff, each counted against the destination's limits.
            self._batch_refused_until = time.monotonic() + BATCH_REFUSED_SECONDS
            raise BatchRefused(_describe(response))
        if response.status_code != 200:
            failure_class, reason_code = classify_status(response.status_code)
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            return [
                DeliveryResult.failed(
                    failure_class,
                    reason_code,
                    _describe(response),
                    retry_after=retry_after,
                    status_code=response.status_code,
                    latency_ms=latency_ms,
                )
            ] * len(outgoings)
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

    def _get(self, path: str, params: dict | None = None) -> "Answer":
        try:
            response = self._request(
                "GET", f"{path}?{urlencode(params)}" if params else path, None, self._signed("")
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise LookupFailed(f"receiver not reachable: {type(exc).__name__}") from exc
        if response.status_code in (401, 403):
            raise LookupFailed(f"receiver refused the credentials (HTTP {response.status_code})")
        return response

    def lookup(self, action_key: str) -> RemoteTask | None:
        response = self._get(f"/tasks/{quote(action_key, safe=':')}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise LookupFailed(f"lookup answered HTTP {response.status_code}")
        try:
            return _remote_task(response.json())
        except (ValueError, KeyError, TypeError) as exc:
            raise LookupFailed(f"lookup answer is not a valid task: {exc}") from exc

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        response = self._get("/tasks", {"after": after, "limit": limit})
        if response.status_code != 200:
            raise LookupFailed(f"key listing answered HTTP {response.status_code}")
        try:
            return [_remote_task(item) for item in response.json()["items"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise LookupFailed(
                f"key listing holds an item that is not a valid task: {exc}"
            ) from exc


def _item_result(
    status: object,
    body: object,
    retry_after: str | None,
    outgoing: Outgoing,
    latency_ms: int,
    *,
    describe: Callable[[], str],
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
        failure_class, reason_code, describe(), retry_after=parse_retry_after(retry_after), **common
    )


def _remote_task(item: dict) -> RemoteTask:
    """A task as the receiver reports it; ValueError when it is more than the outbox row can hold."""
    task_id, status = item["task_id"], item.get("status") or ""
    check_storable(task_id, status)
    return RemoteTask(
        action_key=item["action_key"],
        task_id=task_id,
        payload_hash=item["payload_hash"],
        status=status,
    )


def _batch_results(response: "Answer", expected: int) -> tuple[list, str]:
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
    return _item_result(
        fields.get("http_status"),
        item,
        str(retry_after) if retry_after else None,
        outgoing,
        latency_ms,
        describe=lambda: redact_text(json.dumps(item)[:500]),
    )


def _describe(response: "Answer") -> str:
    try:
        body = json.dumps(response.json())[:500]
    except ValueError:
        body = response.text[:200]
    return redact_text(f"HTTP {response.status_code}: {body}")


_configured: Destination | None = None
_configured_lock = threading.Lock()


def destination_from_config(config: dict) -> Destination:
    kind = config.get("kind", "http")
    if kind == "in_process":
        return InProcessDestination(
            retry_policy=RetryPolicy.from_config(config.get("retry")),
            name=config.get("name", "receiver"),
            supports_idempotency=config.get("supports_idempotency", True),
            supports_lookup=config.get("supports_lookup", True),
        )
    if kind == "http":
        return HttpDestination(**{k: v for k, v in config.items() if k != "kind"})
    raise ValueError(f"unknown destination kind {kind!r}")


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
