"""The configuration of an `idempotency_key_http` destination, checked whole before anything is built: an
unknown key or a missing one is a ValueError naming it. Every key is described in
docs/destinations/idempotency_key_http.md."""

from dataclasses import dataclass, field

from outbox.destinations.http.fields import header_name, relative_path, static_headers
from outbox.destinations.http.undo_request import UndoRequest, parse_undo
from outbox.destinations.idempotency_key.auth import (
    Credentials,
    check_keys,
    credentials_from_config,
)
from outbox.destinations.idempotency_key.contract import Contract, Fields, check_path
from outbox.destinations.idempotency_key.placement import (
    KeyPlacement,
    Search,
    parse_key,
    parse_search,
)
from outbox.models import Handoff
from outbox.retry import RetryPolicy

NAME_MAX = Handoff._meta.get_field("destination").max_length

TOP_REQUIRED = {"name", "url", "create", "receipt", "auth"}
TOP_OPTIONAL = {
    "key",
    "idempotency_header",
    "replayed_header",
    "headers",
    "lookup",
    "statuses",
    "error_code",
    "error_codes",
    "connect_timeout",
    "read_timeout",
    "retry",
    "max_connections",
    "undo",
    "replays_same_key",
    "samples",
    "override_reasons",
    "probe_body",
}
CREATE_METHODS = {"POST", "PUT", "PATCH"}
# The answers a destination entry may keep as samples, read by `destinations check` (contract_checks.py).
SAMPLE_NAMES = ("create", "lookup", "duplicate", "undo")
OVERRIDE_REASON_CHARS = 500
# Headers the destination sets itself: static `headers` may not carry them (a secret is named in `auth`).
OWN_HEADERS = {"authorization", "content-type", "proxy-authorization"}


@dataclass(frozen=True)
class Create:
    method: str
    path: str
    payload_hash_header: str | None
    # Where the body carries the payload's hash (dotted path), for a provider that echoes it in a search.
    payload_hash_property: str | None = None


@dataclass(frozen=True)
class Lookup:
    method: str
    path: str  # with "{key}" where the action key goes, percent-encoded ("" with a search)
    fields: Fields  # with a search: read in the entry whose echoed key is ours
    not_found: frozenset[int]
    search: Search | None = None

    def path_for(self, quoted_key: str) -> str:
        return self.path.replace("{key}", quoted_key)


@dataclass(frozen=True)
class Config:
    name: str
    url: str
    create: Create
    receipt: Fields
    credentials: Credentials
    # The header that carries the key where `key.in` is "header" (None otherwise).
    idempotency_header: str | None
    replayed_header: str
    headers: dict[str, str]
    lookup: Lookup | None
    contract: Contract
    connect_timeout: float
    read_timeout: float
    retry: RetryPolicy
    max_connections: int
    # How a compensation reverses a delivered step here (None: a person undoes it by hand).
    undo: UndoRequest | None = None
    # A repeat with the same key and body answers the original (the draft's replay): sending again settles.
    replays_same_key: bool = True
    # Where the key travels (`idempotency_key.placement`): a header unless configured otherwise.
    key: KeyPlacement = KeyPlacement(where="header", header="Idempotency-Key")
    # Answers the provider gave (by SAMPLE_NAMES): `check` reads the configured paths in them.
    samples: dict = field(default_factory=dict)
    # Why an override that contradicts the contract's meaning is right here, by field ("statuses.422").
    override_reasons: dict[str, str] = field(default_factory=dict)
    # The body `destinations probe` creates (None: PROBE_BODY of destination_probes.py).
    probe_body: dict | None = None


def _text(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} must be a non-empty text, not {value!r}")
    return value


def _path(where: str, value: object, url: str) -> str:
    return relative_path(where, _text(where, value), url)


def _positive(where: str, value: object, default: float) -> float:
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{where} must be a positive number of seconds, not {value!r}")
    return float(value)


def _create(config: object, url: str) -> Create:
    check_keys(
        "create", config, {"path"}, {"method", "payload_hash_header", "payload_hash_property"}
    )
    method = str(config.get("method", "POST")).upper()
    if method not in CREATE_METHODS:
        raise ValueError(f"create.method must be one of {', '.join(sorted(CREATE_METHODS))}")
    header = config.get("payload_hash_header")
    hash_property = config.get("payload_hash_property")
    return Create(
        method=method,
        path=_path("create.path", config["path"], url),
        payload_hash_header=header_name("create.payload_hash_header", header) if header else None,
        payload_hash_property=check_path("create.payload_hash_property", hash_property)
        if hash_property is not None
        else None,
    )


def _lookup(config: object, url: str) -> Lookup | None:
    if config is None:
        return None
    if isinstance(config, dict) and "search" in config:
        return _search_lookup(config, url)
    check_keys(
        "lookup", config, {"path", "id"}, {"method", "key", "payload", "payload_hash", "not_found"}
    )
    method = str(config.get("method", "GET")).upper()
    if method not in {"GET", "POST"}:
        raise ValueError("lookup.method must be GET or POST")
    path = _path("lookup.path", config["path"], url)
    if "{key}" not in path or path.replace("{key}", "").count("{"):
        raise ValueError("lookup.path must hold '{key}' (where the key goes) and no other '{...}'")
    return Lookup(
        method=method,
        path=path,
        fields=Fields.from_config("lookup", _fields(config)),
        not_found=_not_found(config),
    )


def _fields(config: dict) -> dict:
    return {name: config.get(name) for name in ("id", "key", "payload", "payload_hash")}


def _search_lookup(config: dict, url: str) -> Lookup:
    """A lookup by a search answering a list; `id`, `payload`, `payload_hash` are read in our entry."""
    if "path" in config or "method" in config:
        raise ValueError("lookup: a search names its request in lookup.search, not lookup.path")
    check_keys(
        "lookup",
        config,
        {"search", "results", "match", "id"},
        {"payload", "payload_hash", "not_found"},
    )
    search = parse_search(config["search"], url, results=config["results"], match=config["match"])
    return Lookup(
        method=search.method,
        path="",
        fields=Fields.from_config("lookup", _fields(config)),
        not_found=_not_found(config),
        search=search,
    )


def _not_found(config: dict) -> frozenset[int]:
    not_found = config.get("not_found", [404])
    if not isinstance(not_found, list) or not all(
        isinstance(s, int) and 400 <= s <= 499 for s in not_found
    ):
        raise ValueError("lookup.not_found must be a list of 4xx statuses, such as [404]")
    return frozenset(not_found)


def _headers(config: object, idempotency_header: str | None) -> dict[str, str]:
    config = config or {}
    if not isinstance(config, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in config.items()
    ):
        raise ValueError("headers must be an object of texts")
    own = OWN_HEADERS | ({idempotency_header.lower()} if idempotency_header else set())
    taken = sorted(h for h in config if h.lower() in own)
    if taken:
        raise ValueError(f"headers: {', '.join(taken)} cannot be set here (secrets go in auth)")
    return static_headers("headers", config)


def _retry(config: object) -> RetryPolicy:
    try:
        return RetryPolicy.from_config(config)
    except TypeError as exc:
        raise ValueError(f"retry: {exc}") from exc


def _replays(value: object, key: KeyPlacement) -> bool:
    replays = key.idempotent if value is None else value
    if not isinstance(replays, bool):
        raise ValueError(f"replays_same_key must be true or false, not {replays!r}")
    if replays and not key.idempotent:
        raise ValueError(
            "replays_same_key cannot be true where key.in is 'none': without idempotency a repeat is a "
            "second effect"
        )
    return replays


def _samples(value: object) -> dict:
    if not isinstance(value or {}, dict):
        raise ValueError('samples must be an object of answers, such as {"create": {...}}')
    unknown = sorted(set(value or {}) - set(SAMPLE_NAMES))
    if unknown:
        raise ValueError(
            f"samples: unknown sample(s) {', '.join(unknown)} (known: {', '.join(SAMPLE_NAMES)})"
        )
    return dict(value or {})


def _override_reasons(value: object, contract: Contract) -> dict[str, str]:
    """Each reason names an override of this destination (`statuses.422`, `error_codes.<code>`)."""
    if not isinstance(value or {}, dict):
        raise ValueError('override_reasons must be an object: {"statuses.422": "why"}')
    overrides = {f"statuses.{status}" for status in contract.statuses}
    overrides |= {f"error_codes.{code}" for code in contract.error_codes or {}}
    for where, reason in (value or {}).items():
        _override_reason(where, reason, overrides)
    return dict(value or {})


def _override_reason(where: str, reason: object, overrides: set[str]) -> None:
    if where not in overrides:
        raise ValueError(
            f"override_reasons.{where}: names no override of this destination "
            "(statuses.<status> or error_codes.<code>)"
        )
    if not isinstance(reason, str) or not 0 < len(reason.strip()) <= OVERRIDE_REASON_CHARS:
        raise ValueError(
            f"override_reasons.{where} must say why in 1 to {OVERRIDE_REASON_CHARS} characters"
        )


def _probe_body(value: object) -> dict | None:
    if value is not None and not isinstance(value, dict):
        raise ValueError("probe_body must be a JSON object (the body `destinations probe` creates)")
    return value


def parse_config(config: dict) -> Config:
    """The checked configuration; ValueError naming what is unknown, missing or wrong."""
    check_keys("idempotency_key_http destination", config, TOP_REQUIRED, TOP_OPTIONAL)
    name = _text("name", config["name"])
    if len(name) > NAME_MAX:
        raise ValueError(f"name must be at most {NAME_MAX} characters")
    url = _text("url", config["url"]).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"url must be an http:// or https:// URL, not {url!r}")
    create = _create(config["create"], url)
    key = parse_key(
        config.get("key"), legacy_header=config.get("idempotency_header"), create_path=create.path
    )
    check_keys("receipt", config["receipt"], {"id"}, {"key", "payload", "payload_hash"})
    max_connections = config.get("max_connections", 8)
    if (
        isinstance(max_connections, bool)
        or not isinstance(max_connections, int)
        or max_connections < 1
    ):
        raise ValueError("max_connections must be a positive whole number")
    contract = Contract.from_config(
        config.get("statuses"), config.get("error_code"), config.get("error_codes")
    )
    return Config(
        name=name,
        url=url,
        create=create,
        receipt=Fields.from_config("receipt", config["receipt"]),
        credentials=credentials_from_config(config["auth"]),
        idempotency_header=key.header,
        replayed_header=header_name(
            "replayed_header", config.get("replayed_header", "Idempotent-Replayed"), sent=False
        ),
        headers=_headers(config.get("headers"), key.header),
        lookup=_lookup(config.get("lookup"), url),
        contract=contract,
        connect_timeout=_positive("connect_timeout", config.get("connect_timeout"), 2.0),
        read_timeout=_positive("read_timeout", config.get("read_timeout"), 5.0),
        retry=_retry(config.get("retry")),
        max_connections=max_connections,
        undo=parse_undo(config.get("undo")),
        replays_same_key=_replays(config.get("replays_same_key"), key),
        key=key,
        samples=_samples(config.get("samples")),
        override_reasons=_override_reasons(config.get("override_reasons"), contract),
        probe_body=_probe_body(config.get("probe_body")),
    )
