"""The `idempotency_key_http` kind: a JSON-over-HTTP API on the IETF Idempotency-Key header draft, reached by
configuration alone (docs/destinations/idempotency_key_http.md; checked by `idempotency_key.config`).

Its contract: the action key goes in the configured header, the approved payload is the JSON body; a 2xx
answer is a delivery when it holds a receipt id at the configured place (and echoes the key and payload sent,
where it is configured to); any other answer means what `idempotency_key.contract.Contract` says. A lookup by
a configured URL template, when there is one, settles an unknown outcome. Such an API has no listing of keys:
`list_keys` raises LookupFailed, so a full reconciliation run of this destination is stored as failed with
that reason, while its keys are still checked one by one (`lookup`).

Connections, the proxy rules and the reading of a failed call are the HTTP kind's (`http.connections`,
`http.answers`); credentials are read at each call (`idempotency_key.auth`).
"""

import contextlib
import json
import time
from urllib.parse import quote

import urllib3

from lib.telemetry import call_span, note, trace_headers
from outbox.destinations.base import Destination, LookupFailed, RemoteTask, WorkAnswer
from outbox.destinations.http.answers import (
    CALL_FAILURES,
    call_failure,
    describe_answer,
    lookup_refused,
    lookup_without_credentials,
)
from outbox.destinations.http.connections import (
    Answer,
    Direct,
    Proxied,
    proxy_for,
    without_credentials,
)
from outbox.destinations.http.mapped_request import MappedParts
from outbox.destinations.http.undo_request import UndoUnfilled
from outbox.destinations.http.work_read import read_work_over_http
from outbox.destinations.idempotency_key.auth import CREDENTIAL_FAILURES
from outbox.destinations.idempotency_key.config import Config, parse_config
from outbox.destinations.idempotency_key.contract import (
    NOT_REPORTED,
    FieldMissing,
    NoEntry,
    SeveralEntries,
    dig,
    receipt_entry,
)
from outbox.destinations.idempotency_key.placement import KeyNotPlaced
from outbox.failures import DeliveryResult, MalformedReceipt, Outgoing, parse_retry_after
from outbox.models import FailureClass
from outbox.payloads import canonical_json

# The answer kept with a receipt (for audit) when it is no larger than this, as canonical JSON.
KEPT_ANSWER_CHARS = 8000


class IdempotencyKeyHttpDestination(Destination):
    """An API that honours an idempotency key header, reached over pooled HTTP connections."""

    supports_idempotency = True
    supports_batch = False

    def __init__(self, config: Config):
        self.config = config
        self.name = config.name
        self.base_url = config.url
        self.supports_lookup = config.lookup is not None
        # Without idempotency (`key.in` "none") the attempts ledger decides, as for e-mail.
        self.supports_idempotency = config.key.idempotent
        self.replays_same_key = config.replays_same_key
        self.undo = "request" if config.undo else ""
        self.retry_policy = config.retry
        # An OAuth2 token fetched before the call (its first, or the last one expired) is part of the call's
        # time: the lease it is made under must outlast both (`lease_rule.py`).
        fetch = config.credentials.fetch_seconds
        self.call_seconds = fetch + config.connect_timeout + config.read_timeout
        if fetch:
            self.call_seconds_keys = (f"auth's token fetch ({fetch:g} s)", *self.call_seconds_keys)
        self._pool_options = {
            "maxsize": config.max_connections,
            "block": False,
            "retries": False,
            "timeout": urllib3.Timeout(connect=config.connect_timeout, read=config.read_timeout),
        }
        self._proxy_url = proxy_for(self.base_url)
        self.proxy = without_credentials(self._proxy_url) if self._proxy_url else None
        self._pool = self._connections()

    @classmethod
    def from_config(cls, config: dict) -> "IdempotencyKeyHttpDestination":
        return cls(parse_config(config))

    def describe(self) -> str:
        return f"{self.name} at {self.base_url}"

    def describe_contract(self) -> str:
        """The contract in words, for the people watching the destination."""
        lookup = self.config.lookup
        asked = "no lookup"
        if lookup and lookup.search:
            asked = f"lookup by a search, {lookup.search.method} {lookup.search.path}"
        elif lookup:
            asked = f"lookup by {lookup.method} {lookup.path}"
        undo = self.config.undo.describe() if self.config.undo else "no undo: a person undoes"
        replays = "a repeat with the same key replays" if self.replays_same_key else "no replay"
        return (
            f"{self.config.key.describe()}; {asked}; {replays}; "
            f"{undo}; no key listing; no batch; {self.config.credentials.describe()}"
        )

    def credentials_missing(self) -> list[str]:
        """The secrets missing now, each naming its variable or file ([] when all are there)."""
        return self.config.credentials.missing()

    def _connections(self) -> Direct | Proxied:
        if self._proxy_url:
            return Proxied(self.base_url, self._proxy_url, self._pool_options)
        return Direct(self.base_url, self._pool_options)

    def close(self) -> None:
        pool, self._pool = self._pool, self._connections()
        pool.close()
        self.config.credentials.close()

    def _request(self, method: str, path: str, body: bytes | None, headers: dict) -> Answer:
        answer = self._send(method, path, body, headers)
        if answer.status_code == 401 and (renewed := self.config.credentials.renewed(headers)):
            # An OAuth2 token the API no longer takes (revoked, or expired before its `expires_in`): the
            # same request (same key) once more with a new token, before the answer is classified.
            answer = self._send(method, path, body, {**headers, **renewed})
        return answer

    def _send(self, method: str, path: str, body: bytes | None, headers: dict) -> Answer:
        response = self._pool.urlopen(
            method,
            path,
            body=body,
            headers=trace_headers({**self.config.headers, "Accept": "application/json", **headers}),
            retries=False,
            redirect=False,
            preload_content=True,
        )
        return Answer(status_code=response.status, headers=response.headers, content=response.data)

    def deliver(self, outgoing: Outgoing) -> DeliveryResult:
        with call_span(self.name, outgoing.action_key):
            result = self._deliver(outgoing)
            note(status_code=result.status_code or 0, failure_class=result.failure_class or "")
        return result

    def _deliver(self, outgoing: Outgoing) -> DeliveryResult:
        try:
            auth = self.config.credentials.headers()
        except CREDENTIAL_FAILURES as exc:
            # Never a request without its credentials: a missing secret or a refused OAuth2 client is the
            # destination's problem, which pauses it; a token endpoint out of reach is transient.
            return DeliveryResult.failed(
                exc.failure_class, exc.reason_code, str(exc), retry_after=exc.retry_after
            )
        if outgoing.undo is not None:
            return self._undo(outgoing, auth)
        create, key = self.config.create, self.config.key
        try:
            mapped = MappedParts.of(outgoing.request)
        except ValueError as exc:
            return DeliveryResult.failed(FailureClass.PERMANENT, "request_refused", str(exc))
        headers = {
            **mapped.headers,
            **auth,
            "Content-Type": "application/json",
            **key.headers(outgoing.action_key),
        }
        if create.payload_hash_header:
            headers[create.payload_hash_header] = outgoing.payload_hash
        hashed = {create.payload_hash_property: outgoing.payload_hash}
        try:
            body = key.body(
                outgoing.payload,
                outgoing.action_key,
                hashed if create.payload_hash_property else {},
            )
        except KeyNotPlaced as exc:
            return DeliveryResult.failed(FailureClass.PERMANENT, "key_not_placed", str(exc))
        started = time.monotonic()
        try:
            response = self._request(
                create.method,
                key.path(mapped.path(create.path), outgoing.action_key),
                canonical_json(body).encode(),
                headers,
            )
        except CALL_FAILURES as exc:
            return call_failure(exc, proxy=self.proxy)
        except CREDENTIAL_FAILURES as exc:  # a new token after a 401 could not be had
            return DeliveryResult.failed(
                exc.failure_class, exc.reason_code, str(exc), retry_after=exc.retry_after
            )
        return self._result(response, outgoing, int((time.monotonic() - started) * 1000))

    def _result(self, response: Answer, outgoing: Outgoing, latency_ms: int) -> DeliveryResult:
        common = {"status_code": response.status_code, "latency_ms": latency_ms}
        body, not_json = _json_and_why(response)
        duplicate = self.config.key.duplicate
        existing = duplicate.existing_id(response.status_code, body) if duplicate else None
        if existing is not None:
            # The unique property already holds our key: the effect is there, settled, never a conflict.
            return DeliveryResult.ok(
                task_id=existing,
                created=False,
                receipt=_receipt(existing, outgoing, response.status_code, body),
                **common,
            )
        if 200 <= response.status_code < 300:
            if body is None and self.config.key.where == "path" and self.config.lookup:
                # An upsert answered 204 No Content: done, and its id is asked for by the key.
                return self._upserted(outgoing, response.status_code, common)
            if not_json:
                return DeliveryResult.failed(
                    FailureClass.MALFORMED,
                    "malformed_receipt",
                    f"HTTP {response.status_code} without a valid receipt: {not_json}",
                    **common,
                )
            try:
                entry = receipt_entry(self.config.receipt, body, outgoing)
            except MalformedReceipt as exc:
                return DeliveryResult.failed(
                    FailureClass.MALFORMED,
                    "malformed_receipt",
                    f"HTTP {response.status_code} without a valid receipt: {exc}",
                    **common,
                )
            replayed = response.headers.get(self.config.replayed_header, "").lower() == "true"
            return DeliveryResult.ok(
                task_id=entry.task_id,
                created=not replayed,
                receipt=_receipt(entry.task_id, outgoing, response.status_code, body),
                **common,
            )
        return self._refused(response, body, **common)

    def _upserted(self, outgoing: Outgoing, status: int, common: dict) -> DeliveryResult:
        try:
            found = self.lookup(outgoing.action_key)
        except LookupFailed as exc:
            found, detail = None, str(exc)
        else:
            detail = "the lookup found no entry for the key"
        if found is None or not found.same_payload(outgoing.payload, outgoing.payload_hash):
            return DeliveryResult.failed(
                FailureClass.MALFORMED,
                "malformed_receipt",
                f"HTTP {status} without a body, and its entry is not known: {detail}",
                **common,
            )
        return DeliveryResult.ok(
            task_id=found.task_id,
            created=status != 204,
            receipt={**_receipt(found.task_id, outgoing, status, None), "found_by": "lookup"},
            **common,
        )

    def undo_payload_fields(self) -> frozenset[str] | None:
        return self.config.undo.payload_fields() if self.config.undo else frozenset()

    def _undo(self, outgoing: Outgoing, auth: dict) -> DeliveryResult:
        """A compensation: the configured undo request under the compensation's own key, never the create.
        Without one nothing is sent (compensation plans such a step as a residual; this guards a plan older
        than the configuration)."""
        target, undo = outgoing.undo, self.config.undo
        if undo is None:
            return DeliveryResult.failed(
                FailureClass.PERMANENT,
                "no_undo",
                self.undo_missing(target.action_key, target.receipt_id),
            )
        try:
            body = undo.body_for(target, outgoing.payload)
        except UndoUnfilled as exc:
            return DeliveryResult.failed(FailureClass.PERMANENT, "undo_unfilled", str(exc))
        headers = {**auth, **self.config.key.headers(outgoing.action_key)}
        if body is not None:
            headers["Content-Type"] = "application/json"
        started = time.monotonic()
        try:
            response = self._request(undo.method, undo.path_for(target), body, headers)
        except CALL_FAILURES as exc:
            return call_failure(exc, proxy=self.proxy)
        except CREDENTIAL_FAILURES as exc:
            return DeliveryResult.failed(
                exc.failure_class, exc.reason_code, str(exc), retry_after=exc.retry_after
            )
        latency_ms = int((time.monotonic() - started) * 1000)
        if response.status_code in undo.success:
            return _undone(response, outgoing, undo, latency_ms)
        return self._refused(
            response,
            _json_or_none(response),
            status_code=response.status_code,
            latency_ms=latency_ms,
        )

    def _refused(self, response: Answer, body: object, **common) -> DeliveryResult:
        """A create's or an undo's answer that is not a success, read through the contract."""
        failure_class, reason_code = self.config.contract.classify(response.status_code, body)
        return DeliveryResult.failed(
            failure_class,
            reason_code,
            describe_answer(response),
            retry_after=parse_retry_after(
                response.headers.get("Retry-After"), date=response.headers.get("Date")
            ),
            **common,
        )

    def lookup(self, action_key: str) -> RemoteTask | None:
        """The entry the destination holds for the key, None when it holds none (a `not_found` status, or an
        empty list where the id's path indexes one); LookupFailed when nothing is known."""
        lookup = self.config.lookup
        if lookup is None:
            raise LookupFailed(f"{self.name} has no lookup configured: check at the destination")
        try:
            headers = self.config.credentials.headers()
        except CREDENTIAL_FAILURES as exc:
            raise lookup_without_credentials(exc) from exc
        path, body = lookup.path_for(quote(action_key, safe="")), None
        if lookup.search:
            path, body = lookup.search.request(action_key)
            if body is not None:
                headers = {**headers, "Content-Type": "application/json"}
        try:
            response = self._request(lookup.method, path, body, headers)
        except CALL_FAILURES as exc:
            raise LookupFailed(f"{self.name} not reachable: {type(exc).__name__}") from exc
        except CREDENTIAL_FAILURES as exc:
            raise lookup_without_credentials(exc) from exc
        if response.status_code in lookup.not_found:
            return None
        if response.status_code in (401, 403):
            raise LookupFailed(f"{self.name} refused the credentials (HTTP {response.status_code})")
        if not 200 <= response.status_code < 300:
            # A 429 or 503 with Retry-After asks the whole destination to wait: the caller's permit holds it.
            raise lookup_refused(f"lookup answered {describe_answer(response)}", response)
        return self._remote_task(action_key, _lookup_body(response))

    def _remote_task(self, action_key: str, body: object) -> RemoteTask | None:
        fields, search = self.config.lookup.fields, self.config.lookup.search
        try:
            # A search's answer is a list: the entry whose echoed key is ours, if any.
            body = search.entry(body, action_key) if search else body
            entry = fields.read(body, single=True) if body is not None else None
        except NoEntry:
            return None
        except (FieldMissing, SeveralEntries, MalformedReceipt) as exc:
            raise LookupFailed(f"lookup answer holds no single valid entry: {exc}") from exc
        if entry is None:
            return None
        if entry.key is not None and entry.key != action_key:
            raise LookupFailed(f"lookup answered an entry for another key at {fields.key}")
        # Without a comparable echo the entry is never taken for ours: `settlement_for` sends it to a person.
        return RemoteTask(
            action_key=action_key,
            task_id=entry.task_id,
            payload_hash=entry.payload_hash if entry.payload_hash is not None else NOT_REPORTED,
            echoed_payload=entry.payload,
        )

    def read_work(self, *, receipt_id: str, action_key: str) -> WorkAnswer:
        return read_work_over_http(
            self, self._request, receipt_id=receipt_id, action_key=action_key
        )

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        raise LookupFailed(
            f"{self.name} cannot list its keys: an Idempotency-Key API offers no listing of the keys "
            "it holds, so a reconciliation run cannot compare this destination's side; each key is "
            "checked by lookup instead"
        )


def _json_or_none(response: Answer) -> object:
    return _json_and_why(response)[0]


def _lookup_body(response: Answer) -> object:
    """A 2xx lookup answer's body; not "no entry" when it is not strict JSON: such an answer proves nothing
    about the key (LookupFailed)."""
    body, not_json = _json_and_why(response)
    if not_json:
        raise LookupFailed(f"lookup answered HTTP {response.status_code}: {not_json}")
    return body


def _json_and_why(response: Answer) -> tuple[object, str]:
    """The body as strict JSON and "", or None and why it is not ("" for an empty body)."""
    if not response.content.strip():
        return None, ""
    try:
        return response.json(), ""
    except ValueError as exc:
        return None, str(exc)


def _undone(response: Answer, outgoing: Outgoing, undo, latency_ms: int) -> DeliveryResult:
    """An undo answered with a success status: delivered, its id the one the answer names (where the undo
    says) or the step's receipt id; a 404 means it was already gone."""
    body = _json_or_none(response)
    task_id = outgoing.undo.receipt_id
    if undo.receipt_id:
        with contextlib.suppress(FieldMissing, SeveralEntries):
            task_id = str(dig(body, undo.receipt_id))
    receipt = _receipt(task_id, outgoing, response.status_code, body)
    receipt["undoes"] = {
        "action_key": outgoing.undo.action_key,
        "receipt_id": outgoing.undo.receipt_id,
    }
    return DeliveryResult.ok(
        task_id=task_id,
        created=response.status_code != 404,
        receipt=receipt,
        status_code=response.status_code,
        latency_ms=latency_ms,
    )


def _receipt(task_id: str, outgoing: Outgoing, status: int, body: object) -> dict:
    """What the handoff keeps of a receipt: the id, the key and payload hash sent, the answer if small."""
    receipt = {
        "task_id": task_id,
        "action_key": outgoing.action_key,
        "payload_hash_sent": outgoing.payload_hash,
        "http_status": status,
    }
    if len(json.dumps(body)) <= KEPT_ANSWER_CHARS:
        receipt["answer"] = body
    else:
        receipt["answer_omitted"] = f"larger than {KEPT_ANSWER_CHARS} characters"
    return receipt
