"""What an API on the IETF Idempotency-Key header draft means by its answers, and where its answers hold the
fields the outbox needs: the pure half of the `idempotency_key_http` kind (no network, no secrets).

By default the draft's semantics: 2xx with a receipt id is delivered; 400 the request is wrong (a missing or
invalid key, a body refused); 409 a request with this key is still being processed (retry later, same key);
422 this key was used with another payload (conflict); 401/403 the credential is refused; 429 wait
(Retry-After); 5xx and everything else as `outbox.failures.classify_status` says for every HTTP kind (500
uncertain, 502-504 transient). A destination's configuration overrides a status (`statuses`) or names an
error code in the error body that decides before the status does (`error_code`, `error_codes`), because real
APIs differ: several answer 409 for a reused key and tell "in progress" apart only by a code in the body.
"""

from dataclasses import dataclass

from outbox.failures import MalformedReceipt, Outgoing, check_storable, classify_status
from outbox.models import FailureClass, Handoff
from outbox.payloads import holds_sent, payload_hash

REASON_MAX = Handoff._meta.get_field("reason_code").max_length

DRAFT_STATUSES: dict[int, tuple[str, str]] = {
    400: (FailureClass.PERMANENT, "bad_request"),
    401: (FailureClass.CREDENTIAL, "credential_rejected"),
    403: (FailureClass.CREDENTIAL, "credential_rejected"),
    409: (FailureClass.TRANSIENT, "request_in_progress"),
    422: (FailureClass.CONFLICT, "key_reused_with_other_payload"),
    429: (FailureClass.TRANSIENT, "rate_limited"),
}

# What a lookup reports as the entry's payload hash when the destination echoes nothing comparable. It never
# equals a payload hash, so `settlement_for` does not take the entry for ours: a person compares (see the docs).
NOT_REPORTED = "(not reported by the destination)"


# The dotted path of the whole answer (or entry): where a provider echoes the fields sent at its top level.
WHOLE = "."


class FieldMissing(ValueError):
    """A dotted path leads nowhere in the answer."""


class NoEntry(FieldMissing):
    """A dotted path indexes an empty list (or past its end): the answer holds no entry."""


class SeveralEntries(ValueError):
    """A dotted path indexes a list of more than one item where one entry per key is expected."""


def dig(document: object, path: str, *, single: bool = False) -> object:
    """The value at `path` ("data.id", "results.0.id": a number indexes a list; "." the document itself).
    `single`: a list on the way must hold at most one item (SeveralEntries otherwise)."""
    if path == WHOLE:
        return document
    value = document
    for part in path.split("."):
        if isinstance(value, list):
            if not part.isdigit():
                raise FieldMissing(f"{path}: {part!r} cannot index a list")
            if single and len(value) > 1:
                raise SeveralEntries(
                    f"{path}: {len(value)} items where one entry per key is expected"
                )
            if int(part) >= len(value):
                raise NoEntry(f"{path}: no item {part}")
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise FieldMissing(f"{path}: no {part!r} in the answer")
    return value


def check_path(where: str, path: object) -> str:
    if path == WHOLE:
        return path
    if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
        raise ValueError(f"{where} must be a dotted path such as 'data.id', not {path!r}")
    return path


@dataclass(frozen=True)
class Entry:
    """What an answer says of the entry made for a key: its id, and what it echoes (None: not echoed)."""

    task_id: str
    key: str | None
    payload_hash: str | None
    # The payload echoed, where `payload` names it (compared on the fields sent: `holds_sent`).
    payload: object = None


@dataclass(frozen=True)
class Fields:
    """Where an answer holds the entry's id and, optionally, the key and the payload (or its hash) it echoes."""

    id: str
    key: str | None = None
    payload: str | None = None
    payload_hash: str | None = None

    @classmethod
    def from_config(cls, where: str, config: dict) -> "Fields":
        paths = {
            name: check_path(f"{where}.{name}", config[name])
            for name in ("id", "key", "payload", "payload_hash")
            if config.get(name) is not None
        }
        if "payload" in paths and "payload_hash" in paths:
            raise ValueError(f"{where}: name either 'payload' or 'payload_hash', not both")
        return cls(**paths)

    @property
    def compares_payload(self) -> bool:
        return self.payload is not None or self.payload_hash is not None

    def read(self, document: object, *, single: bool = False) -> Entry:
        """The entry in `document`; FieldMissing (NoEntry: none there), SeveralEntries or MalformedReceipt."""
        raw_id = dig(document, self.id, single=single)
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
            raise MalformedReceipt(f"{self.id} is not an id (a non-empty text or a number)")
        task_id = str(raw_id)
        check_storable(task_id, None)
        key = dig(document, self.key, single=single) if self.key else None
        echoed, document_echoed = None, None
        if self.payload:
            document_echoed = dig(document, self.payload, single=single)
            echoed = payload_hash(document_echoed)
        elif self.payload_hash:
            echoed = str(dig(document, self.payload_hash, single=single))
        return Entry(
            task_id=task_id,
            key=None if key is None else str(key),
            payload_hash=echoed,
            payload=document_echoed,
        )


def receipt_entry(fields: Fields, body: object, sent: Outgoing) -> Entry:
    """The entry a 2xx answer reports for `sent`, or MalformedReceipt saying why it proves nothing: no id, or
    an echo of another key or another payload than the ones sent."""
    try:
        entry = fields.read(body)
    except FieldMissing as exc:
        raise MalformedReceipt(f"receipt has no id: {exc}") from exc
    if entry.key is not None and entry.key != sent.action_key:
        raise MalformedReceipt(f"receipt {fields.key} does not echo the key sent")
    # An echoed body may add the provider's own fields: only the fields sent are compared.
    if (
        entry.payload_hash is not None
        and entry.payload_hash != sent.payload_hash
        and (entry.payload is None or not holds_sent(sent.payload, entry.payload))
    ):
        raise MalformedReceipt("receipt does not echo the payload sent")
    return entry


def _classification(where: str, value: object) -> tuple[str, str]:
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or value[0] not in FailureClass.values
        or not isinstance(value[1], str)
        or not 0 < len(value[1]) <= REASON_MAX
    ):
        raise ValueError(
            f"{where} must be [failure class, reason code] with a class among "
            f"{', '.join(FailureClass.values)} and a reason of 1 to {REASON_MAX} characters, not {value!r}"
        )
    return str(value[0]), value[1]


def _status(text: object) -> int:
    try:
        status = int(str(text))
    except ValueError:
        status = 0
    if not 400 <= status <= 599:
        raise ValueError(f"statuses: {text!r} is not an HTTP error status (400-599)")
    return status


def _object(where: str, value: object) -> dict:
    if not isinstance(value or {}, dict):
        raise ValueError(f"{where} must be an object")
    return value or {}


@dataclass(frozen=True)
class Contract:
    """The failure class and reason code of each answer that is not a receipt."""

    statuses: dict[int, tuple[str, str]]
    error_code: str | None = None
    error_codes: dict[str, tuple[str, str]] | None = None

    @classmethod
    def from_config(
        cls, statuses: dict | None, error_code: str | None, error_codes: dict | None
    ) -> "Contract":
        if bool(error_code) != bool(error_codes):
            raise ValueError("error_code and error_codes go together: name both or neither")
        return cls(
            statuses={
                _status(status): _classification(f"statuses.{status}", value)
                for status, value in _object("statuses", statuses).items()
            },
            error_code=check_path("error_code", error_code) if error_code else None,
            error_codes={
                str(code): _classification(f"error_codes.{code}", value)
                for code, value in _object("error_codes", error_codes).items()
            },
        )

    def code_in(self, body: object) -> str | None:
        """The error code the body carries at `error_code`, None without one."""
        if not self.error_code:
            return None
        try:
            code = dig(body, self.error_code)
        except (FieldMissing, SeveralEntries):
            return None
        return code if isinstance(code, str | int) and not isinstance(code, bool) else None

    def classify(self, status: int, body: object) -> tuple[str, str]:
        """An error code named in `error_codes` decides first, then an overridden status, then the draft."""
        code = self.code_in(body)
        if code is not None and str(code) in (self.error_codes or {}):
            return self.error_codes[str(code)]
        if status in self.statuses:
            return self.statuses[status]
        return DRAFT_STATUSES.get(status) or classify_status(status)
