"""What `destinations apply` and `check` refuse in an `idempotency_key_http` contract that builds but cannot
work (issue 35, "check before, prove after"), each naming the field:

- an override (`statuses`) that gives a status a class contradicting what the contract says it means (a 422
  "key reused with another payload" made transient is retried for the whole retry window, nobody told),
  unless `override_reasons` says why for that field;
- a receipt, lookup, duplicate or undo path that the entry's sample answer (`samples`) does not have (a
  receipt id read at `data.id` where the answer has `id` makes every success a malformed receipt).

Without a sample, `unchecked_paths` names each path nobody checked: `check` prints them as notes. Pure: the
configuration only, never the network (`outbox/services/destination_probes.py` proves it against the API).
"""

from typing import NamedTuple

from outbox.destinations.base import Destination
from outbox.destinations.idempotency_key.config import Config
from outbox.destinations.idempotency_key.contract import (
    WHOLE,
    FieldMissing,
    Fields,
    SeveralEntries,
    dig,
)
from outbox.destinations.idempotency_key.destination import IdempotencyKeyHttpDestination
from outbox.models import FailureClass

C = FailureClass

# What a status means under the contract, the classes that agree with it, and the key placements where the
# meaning holds (None: every placement). 409 and 422 are the IETF Idempotency-Key draft's words about a key
# in a header; a provider keeping the key elsewhere uses them for its own meanings.
MEANINGS: dict[int, tuple[str, frozenset[str], frozenset[str] | None]] = {
    400: (
        "the request is refused as it is (the draft: no key)",
        frozenset({C.PERMANENT, C.CONFLICT}),
        None,
    ),
    401: ("the credential is refused", frozenset({C.CREDENTIAL}), None),
    403: ("the credential is refused", frozenset({C.CREDENTIAL}), None),
    409: (
        "a request with this key is still in progress",
        frozenset({C.TRANSIENT, C.UNCERTAIN}),
        frozenset({"header"}),
    ),
    422: (
        "this key was used with another payload",
        frozenset({C.CONFLICT, C.PERMANENT}),
        frozenset({"header"}),
    ),
    429: ("wait before the next call (rate limited)", frozenset({C.TRANSIENT}), None),
}

# What a class does with an answer: why a contradicting one cannot work.
EFFECTS = {
    C.TRANSIENT: "sent again with the same key for the whole retry window, and nobody is told",
    C.UNCERTAIN: "left unknown until a lookup settles it",
    C.MALFORMED: "left unknown until a lookup settles it",
    C.PERMANENT: "sent to a person at once",
    C.CONFLICT: "sent to a person at once",
    C.CREDENTIAL: "taken for a refused credential, which pauses the destination for every workspace",
}


class ContractRefusal(NamedTuple):
    """Why the contract cannot work as configured: `key`, the field to change ("statuses.422")."""

    key: str
    detail: str

    def __str__(self) -> str:
        return f"{self.key}: {self.detail}"


def _override_refusals(config: Config) -> list[ContractRefusal]:
    refusals = []
    for status, (failure_class, _reason) in sorted(config.contract.statuses.items()):
        meaning, agreeing, placements = MEANINGS.get(status, ("", frozenset(), None))
        where = f"statuses.{status}"
        if (
            not meaning
            or failure_class in agreeing
            or (placements is not None and config.key.where not in placements)
            or where in config.override_reasons
        ):
            continue
        refusals.append(
            ContractRefusal(
                where,
                f"{failure_class!s} contradicts what {status} means here ({meaning}): each such "
                f"answer would be {EFFECTS[failure_class]}; use one of "
                f'{", ".join(sorted(agreeing))}, or say why in override_reasons["{where}"]',
            )
        )
    return refusals


def _holds(where: str, sample: str, document: object, path: str | None) -> list[ContractRefusal]:
    """A refusal when `path` leads nowhere in the sample answer `document`."""
    if path is None or path == WHOLE:
        return []
    try:
        dig(document, path)
    except (FieldMissing, SeveralEntries) as exc:
        return [
            ContractRefusal(where, f"{path!r} is not in samples.{sample} ({exc}){_keys(document)}")
        ]
    return []


def _keys(document: object) -> str:
    if isinstance(document, dict) and document:
        return f"; it holds {', '.join(sorted(map(str, document)))}"
    return ""


def _fields_refusals(prefix: str, sample: str, document: object, fields: Fields) -> list:
    return [
        refusal
        for name in ("id", "key", "payload", "payload_hash")
        for refusal in _holds(f"{prefix}.{name}", sample, document, getattr(fields, name))
    ]


def _lookup_refusals(config: Config, document: object) -> list[ContractRefusal]:
    lookup = config.lookup
    if lookup.search is None:
        return _fields_refusals("lookup", "lookup", document, lookup.fields)
    if refused := _holds("lookup.results", "lookup", document, lookup.search.results):
        return refused
    entries = dig(document, lookup.search.results)
    if not isinstance(entries, list) or not entries:
        return [
            ContractRefusal(
                "lookup.results",
                f"{lookup.search.results!r} in samples.lookup is not a list of at least one entry "
                "(a sample of a search that found our entry)",
            )
        ]
    entry = entries[0]
    return _holds("lookup.match", "lookup", entry, lookup.search.match) + _fields_refusals(
        "lookup", "lookup", entry, lookup.fields
    )


def _duplicate_refusals(config: Config, document: object) -> list[ContractRefusal]:
    duplicate = config.key.duplicate
    if refused := _holds("key.duplicate.id", "duplicate", document, duplicate.id):
        return refused
    if duplicate.existing_id(duplicate.status, document) is None:
        return [
            ContractRefusal(
                "key.duplicate.pattern",
                f"reads no id in samples.duplicate at {duplicate.id!r} ({dig(document, duplicate.id)!r})",
            )
        ]
    return []


def _sample_refusals(config: Config) -> list[ContractRefusal]:
    samples, refusals = config.samples, []
    checks = {
        "create": lambda doc: _fields_refusals("receipt", "create", doc, config.receipt),
        "lookup": (lambda doc: _lookup_refusals(config, doc)) if config.lookup else None,
        "duplicate": (lambda doc: _duplicate_refusals(config, doc))
        if config.key.duplicate
        else None,
        "undo": (
            (lambda doc: _holds("undo.receipt_id", "undo", doc, config.undo.receipt_id))
            if config.undo
            else None
        ),
    }
    for sample, document in samples.items():
        check = checks[sample]
        if check is None:
            refusals.append(
                ContractRefusal(f"samples.{sample}", f"this destination has no {sample} to read it")
            )
        else:
            refusals += check(document)
    return refusals


def contract_refusals(destination: Destination) -> list[ContractRefusal]:
    """Why the destination's contract cannot work as configured; [] when nothing is seen (or its kind has no
    configured contract)."""
    if not isinstance(destination, IdempotencyKeyHttpDestination):
        return []
    return _override_refusals(destination.config) + _sample_refusals(destination.config)


def _paths(config: Config) -> dict[str, list[tuple[str, str]]]:
    """The configured paths by the sample that checks them: (field, path)."""

    def of(prefix: str, fields: Fields) -> list[tuple[str, str]]:
        named = (
            (f"{prefix}.{n}", getattr(fields, n)) for n in ("id", "key", "payload", "payload_hash")
        )
        return [(where, path) for where, path in named if path not in (None, WHOLE)]

    paths = {"create": of("receipt", config.receipt)}
    if config.lookup:
        search = config.lookup.search
        extra = (
            [("lookup.results", search.results), ("lookup.match", search.match)] if search else []
        )
        paths["lookup"] = extra + of("lookup", config.lookup.fields)
    if config.key.duplicate:
        paths["duplicate"] = [("key.duplicate.id", config.key.duplicate.id)]
    if config.undo and config.undo.receipt_id:
        paths["undo"] = [("undo.receipt_id", config.undo.receipt_id)]
    return paths


def unchecked_paths(destination: Destination) -> list[str]:
    """Each configured path that no sample answer checks, as "receipt.id 'data.id' (no samples.create)"."""
    if not isinstance(destination, IdempotencyKeyHttpDestination):
        return []
    config = destination.config
    return [
        f"{where} {path!r} (no samples.{sample})"
        for sample, paths in _paths(config).items()
        if sample not in config.samples
        for where, path in paths
    ]
