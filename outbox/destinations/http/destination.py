"""The HTTP kind: a receiver reached over its signed HTTP API (`POST /tasks`, `POST /tasks/batch`,
`GET /tasks/<key>`, `GET /tasks?after=`), signed as standard webhooks are, with a pooled client.

Its contract: the action key is the idempotency key (in the body and the `Idempotency-Key` header); a
receipt proves the outcome only when it names the key and payload sent (`validate_receipt`); a status
that is not a receipt means what `classify_status` says; a 413 to a batch means nothing was read.

Its signing secret is never configuration: `secret_env` names the environment variable it is read from
at each call (so a rotated secret is used without a restart), `previous_secret_env` the one a rotation
keeps for a while. Without `secret_env`, the secret is settings.RECEIVER_SIGNING_SECRET (itself read from
the variable of that name when the process starts), as before destinations were data.
"""

import time
from urllib.parse import quote, urlencode

import urllib3
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from lib.telemetry import batch_call_span, call_span, note, trace_headers
from outbox.destinations.base import (
    BatchRefused,
    Destination,
    LookupFailed,
    RemoteTask,
    remote_task,
)
from outbox.destinations.credentials.secret_places import env_refusal, read_env
from outbox.destinations.http.answers import (
    CALL_FAILURES,
    batch_failure,
    batch_item_results,
    batch_lookup_answer,
    call_failure,
    describe_answer,
    lookup_refused,
    single_result,
)
from outbox.destinations.http.connections import (
    Answer,
    Direct,
    Proxied,
    answer_of,
    proxy_for,
    without_credentials,
)
from outbox.failures import DeliveryResult, Outgoing
from outbox.payloads import canonical_json
from outbox.retry import RetryPolicy
from outbox.signing import signed_headers

# How long a destination that refused a batch as too large gets one call per handoff instead.
BATCH_REFUSED_SECONDS = 600.0
# Where the signing secrets come from when the configuration names no variable.
DEFAULT_SECRET_ENV = "RECEIVER_SIGNING_SECRET"  # noqa: S105 - a variable name
DEFAULT_PREVIOUS_SECRET_ENV = "RECEIVER_SIGNING_SECRET_PREVIOUS"  # noqa: S105


def secret_named(variable: str | None, default: str) -> str:
    """The secret a configuration names: the environment variable's value now, or (no variable named) the
    setting of the default variable's name. "" when absent, or when a destination may not name that
    variable (secret_places.py, checked again at each read)."""
    if variable:
        return "" if env_refusal(variable) else read_env(variable)
    return getattr(settings, default, "")


class HttpDestination(Destination):
    """A receiver reached over its signed HTTP API with a pooled client."""

    # The receiver takes a compensating operation as a task of its own key (the task protocol's undo).
    undo = "native"

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
        lookup_batch_size: int = 0,
        retry: dict | None = None,
        signing_secret: str | None = None,
        secret_env: str | None = None,
        previous_secret_env: str | None = None,
        max_connections: int = 8,
    ):
        self.base_url = url.rstrip("/")
        self.name = name
        self.call_seconds = connect_timeout + read_timeout
        self.supports_idempotency = supports_idempotency
        self.supports_lookup = supports_lookup
        self.supports_batch = supports_batch
        # POST /tasks/lookup answers for up to this many keys at once (0: GET /tasks/<key>, one key a request).
        self.lookup_batch_size = lookup_batch_size
        self.retry_policy = RetryPolicy.from_config(retry)
        # Given in code (tests, benchmarks) it is used as it is; otherwise read where secret_env says, per call.
        self.signing_secret = signing_secret
        self.secret_env = secret_env
        self.previous_secret_env = previous_secret_env
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

    @classmethod
    def from_config(cls, config: dict) -> "HttpDestination":
        """The destination a configuration describes; ValueError naming any key it does not take, a secret
        given as a value, or a signing secret that is not where the configuration says."""
        if unknown := sorted(set(config) - CONFIG_KEYS):
            raise ValueError(
                f"unknown configuration key(s) for the http kind: {', '.join(unknown)}"
                + (
                    " (a secret is never configuration: name its variable in secret_env)"
                    if "signing_secret" in unknown
                    else ""
                )
            )
        if "url" not in config:
            raise ValueError("the http kind needs a url")
        destination = cls(**config)
        if not destination.secret_present():
            raise ValueError(f"{destination.secret_missing()} (the signing secret)")
        return destination

    def secret_variable(self) -> str:
        return self.secret_env or DEFAULT_SECRET_ENV

    def secret_missing(self) -> str:
        """Why there is no signing secret: a variable a destination may not name, or one not set."""
        if self.secret_env and (refusal := env_refusal(self.secret_env)):
            return f"secret_env: {refusal}"
        return f"{self.secret_variable()} is not set"

    def secret_present(self) -> bool:
        return bool(self.signing_secret or secret_named(self.secret_env, DEFAULT_SECRET_ENV))

    def describe(self) -> str:
        return f"{self.name} at {self.base_url}"

    def describe_contract(self) -> str:
        """The contract in words, for the people watching the destination."""
        idempotency = (
            "idempotent by the action key (in the body and header Idempotency-Key)"
            if self.supports_idempotency
            else "not idempotent: the effect ledger decides"
        )
        lookup = "lookup by GET /tasks/<key>" if self.supports_lookup else "no lookup"
        if self.supports_lookup and self.lookup_batch_size > 1:
            lookup += f" and POST /tasks/lookup (up to {self.lookup_batch_size} keys)"
        batch = "batch by POST /tasks/batch" if self.supports_batch else "no batch"
        return f"{idempotency}; {lookup}; {batch}; signed with {self.secret_variable()}"

    def credentials_missing(self) -> list[str]:
        """The secrets missing now, each naming its variable ([] when all are there)."""
        return [] if self.secret_present() else [self.secret_missing()]

    def batching(self) -> bool:
        return self.supports_batch and time.monotonic() >= self._batch_refused_until

    def _connections(self) -> Direct | Proxied:
        if self._proxy_url:
            return Proxied(self.base_url, self._proxy_url, self._pool_options)
        return Direct(self.base_url, self._pool_options)

    def close(self) -> None:
        """Close the pooled connections. The destination stays usable: a fresh pool opens connections again."""
        pool, self._pool = self._pool, self._connections()
        pool.close()

    def _signed(self, body: str) -> dict[str, str]:
        """The signature's headers, and the current span's `traceparent` when traced (a receiver's own
        traces join ours)."""
        secret = self.signing_secret or secret_named(self.secret_env, DEFAULT_SECRET_ENV)
        if not secret:
            raise ImproperlyConfigured(
                f"{self.secret_missing()} (signing secret of destination {self.name})"
            )
        return trace_headers(signed_headers(body, secret=secret))

    def _request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        repeatable: bool = False,
    ) -> Answer:
        """`repeatable`: a read (a lookup, a listing), sent once more on a fresh connection when the receiver
        closed the pooled one under it before answering (`answer_of`)."""
        return answer_of(
            self._pool,
            method,
            path,
            repeatable=repeatable,
            body=body,
            headers=headers,
            retries=False,
            redirect=False,
        )

    def _post(
        self, path: str, body: str, extra_headers: dict | None = None, *, repeatable: bool = False
    ) -> tuple[Answer | None, DeliveryResult | None, int]:
        """The answer, or the failure that stands for every item sent, and the latency in ms."""
        headers = {
            **self._signed(body),
            "Content-Type": "application/json",
            **(extra_headers or {}),
        }
        started = time.monotonic()
        try:
            response = self._request("POST", path, body.encode(), headers, repeatable=repeatable)
        except CALL_FAILURES as exc:
            return None, call_failure(exc, proxy=self.proxy), _ms_since(started)
        return response, None, _ms_since(started)

    def deliver(self, outgoing: Outgoing) -> DeliveryResult:
        with call_span(self.name, outgoing.action_key):
            result = self._deliver(outgoing)
            note(status_code=result.status_code or 0, failure_class=result.failure_class or "")
        return result

    def _deliver(self, outgoing: Outgoing) -> DeliveryResult:
        body = canonical_json({"action_key": outgoing.action_key, "payload": outgoing.payload})
        response, failure, latency_ms = self._post(
            "/tasks", body, {"Idempotency-Key": outgoing.action_key}
        )
        if failure is not None:
            return failure
        return single_result(response, outgoing, latency_ms)

    def deliver_batch(self, outgoings: list[Outgoing]) -> list[DeliveryResult]:
        if not self.supports_batch or len(outgoings) < 2:
            return super().deliver_batch(outgoings)
        body = canonical_json(
            {"items": [{"action_key": o.action_key, "payload": o.payload} for o in outgoings]}
        )
        with batch_call_span(self.name, [o.action_key for o in outgoings]):
            response, failure, latency_ms = self._post("/tasks/batch", body)
        if failure is not None:
            return [failure] * len(outgoings)
        if response.status_code == 413:
            # Too many or too large for one call, and nothing read. Single calls from here would be requests the
            # caller's permit does not cover: the caller gives the claims back, and the next batches go one
            # call per handoff, each counted against the destination's limits.
            self._batch_refused_until = time.monotonic() + BATCH_REFUSED_SECONDS
            raise BatchRefused(describe_answer(response))
        if response.status_code != 200:
            return batch_failure(response, len(outgoings), latency_ms)
        return batch_item_results(response, outgoings, latency_ms)

    def _get(self, path: str, params: dict | None = None) -> Answer:
        try:
            response = self._request(
                "GET",
                f"{path}?{urlencode(params)}" if params else path,
                None,
                self._signed(""),
                repeatable=True,
            )
        except CALL_FAILURES as exc:
            raise LookupFailed(f"receiver not reachable: {type(exc).__name__}") from exc
        if response.status_code in (401, 403):
            raise LookupFailed(f"receiver refused the credentials (HTTP {response.status_code})")
        return response

    def lookup(self, action_key: str) -> RemoteTask | None:
        response = self._get(f"/tasks/{quote(action_key, safe=':')}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise lookup_refused(f"lookup answered HTTP {response.status_code}", response)
        try:
            return remote_task(response.json())
        except (ValueError, KeyError, TypeError) as exc:
            raise LookupFailed(f"lookup answer is not a valid task: {exc}") from exc

    def lookup_many(self, action_keys: list[str]) -> dict[str, RemoteTask | None]:
        """`POST /tasks/lookup` {"action_keys": [...]}: the tasks found, the rest None (one request), when the
        destination declares `lookup_batch_size`; otherwise one GET per key."""
        if self.lookup_batch_size < 2 or len(action_keys) < 2:
            return super().lookup_many(action_keys)
        response, failure, _latency_ms = self._post(
            "/tasks/lookup", canonical_json({"action_keys": action_keys}), repeatable=True
        )
        if failure is not None:
            raise LookupFailed(f"receiver not reachable: {failure.reason_code}")
        return batch_lookup_answer(response, action_keys)

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        response = self._get("/tasks", {"after": after, "limit": limit})
        if response.status_code != 200:
            raise lookup_refused(f"key listing answered HTTP {response.status_code}", response)
        try:
            return [remote_task(item) for item in response.json()["items"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise LookupFailed(
                f"key listing holds an item that is not a valid task: {exc}"
            ) from exc


CONFIG_KEYS = {
    "url",
    "name",
    "connect_timeout",
    "read_timeout",
    "supports_idempotency",
    "supports_lookup",
    "supports_batch",
    "lookup_batch_size",
    "retry",
    "secret_env",
    "previous_secret_env",
    "max_connections",
}


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
