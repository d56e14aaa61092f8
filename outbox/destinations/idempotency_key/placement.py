"""Where an `idempotency_key_http` destination's provider keeps the action key, and how a key is searched for:
the `key` object (header, path of an upsert, a unique body property whose duplicate answers with the existing
id, or none) and a lookup's `search` (a request answering a list, the entry whose echoed key is ours). Pure:
the configuration checked whole, and what it makes of one request or one answer (docs/destinations.md).
"""

import copy
import json
from dataclasses import dataclass
from urllib.parse import quote

import re2

from outbox.destinations.http.fields import header_name, relative_path
from outbox.destinations.idempotency_key.auth import check_keys
from outbox.destinations.idempotency_key.contract import (
    FieldMissing,
    SeveralEntries,
    check_path,
    dig,
)

KEY_PLACES = ("header", "path", "body", "none")
KEY_PLACEHOLDER = "{key}"


class KeyNotPlaced(ValueError):
    """The approved body cannot carry the key where it goes (a value already there, or not an object)."""


@dataclass(frozen=True)
class Duplicate:
    """A unique property's duplicate: the status it answers and where the error body names the existing id."""

    status: int
    id: str
    # A regular expression (RE2) over the value at `id`, its first group the id ("Existing ID: (\\d+)").
    pattern: object = None

    def existing_id(self, status: int, body: object) -> str | None:
        """The id of the entry already there, when this answer is the duplicate; None otherwise."""
        if status != self.status:
            return None
        try:
            value = dig(body, self.id)
        except (FieldMissing, SeveralEntries):
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            return None
        if self.pattern is None:
            return str(value) or None
        found = self.pattern.search(str(value))
        return found.group(1) if found and found.group(1) else None


@dataclass(frozen=True)
class KeyPlacement:
    """`in`: header (`name`), path (`{key}` in create.path), body (`property`, kept unique by the provider:
    `duplicate` reads its answer), none (no idempotency; `property`, optional, carries the key for a search)."""

    where: str
    header: str | None = None
    # The dotted path of the body that carries the key (`key.property`).
    carrier: str | None = None
    duplicate: Duplicate | None = None

    @property
    def idempotent(self) -> bool:
        return self.where != "none"

    def headers(self, action_key: str) -> dict[str, str]:
        return {self.header: action_key} if self.where == "header" else {}

    def path(self, path: str, action_key: str) -> str:
        if self.where != "path":
            return path
        return path.replace(KEY_PLACEHOLDER, quote(action_key, safe=""))

    def body(self, payload: dict, action_key: str, extra: dict[str, str]) -> dict:
        """The body sent: the payload with the key (and `extra`: dotted path -> value) written in."""
        placed = {self.carrier: action_key} if self.carrier else {}
        if not placed and not extra:
            return payload
        body = copy.deepcopy(payload)
        for path, value in {**placed, **extra}.items():
            _write(body, path, value)
        return body

    def describe(self) -> str:
        if self.where == "header":
            return f"idempotent by header {self.header}"
        if self.where == "path":
            return "idempotent by upsert: the key in the create path"
        if self.where == "body":
            return (
                f"idempotent by the unique property {self.carrier} (a duplicate is 'already there')"
            )
        carried = f", the key carried in {self.carrier}" if self.carrier else ""
        return f"no idempotency: the attempts ledger decides{carried}"


def _write(body: dict, path: str, value: str) -> None:
    *parents, last = path.split(".")
    target = body
    for part in parents:
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise KeyNotPlaced(f"{path}: {part!r} in the approved payload is not an object")
    if last in target and target[last] != value:
        raise KeyNotPlaced(f"{path}: the approved payload already holds another value there")
    target[last] = value


def _duplicate(config: object) -> Duplicate:
    check_keys("key.duplicate", config, {"status", "id"}, {"pattern"})
    status = config["status"]
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 499:
        raise ValueError(f"key.duplicate.status must be a 4xx status such as 409, not {status!r}")
    pattern = config.get("pattern")
    compiled = None
    if pattern is not None:
        try:
            compiled = re2.compile(pattern) if isinstance(pattern, str) else None
        except re2.error as exc:
            raise ValueError(f"key.duplicate.pattern: not a regular expression: {exc}") from exc
        if compiled is None or compiled.groups < 1:
            raise ValueError(
                "key.duplicate.pattern must be a regular expression whose first group is the id, "
                "such as 'Existing ID: (\\\\d+)'"
            )
    return Duplicate(
        status=status, id=check_path("key.duplicate.id", config["id"]), pattern=compiled
    )


OPTIONAL_BY_PLACE = {
    "header": {"name"},
    "path": set(),
    "body": {"property", "duplicate"},
    "none": {"property"},
}


def _check_create_path(where: str, create_path: str) -> None:
    holds = KEY_PLACEHOLDER in create_path
    if where == "path" and not holds:
        raise ValueError("create.path must hold '{key}' where key.in is 'path' (the upsert's id)")
    if where != "path" and holds:
        raise ValueError("create.path may hold '{key}' only where key.in is 'path'")


def _key_config(config: object, legacy_header: str | None) -> dict:
    """`key` as given, or the header one that `idempotency_header` (the older spelling) names."""
    if config is None:
        header = header_name("idempotency_header", legacy_header or "Idempotency-Key")
        return {"in": "header", "name": header}
    if legacy_header is not None:
        raise ValueError("idempotency_header: name the header in key.name instead, not in both")
    if not isinstance(config, dict) or config.get("in") not in KEY_PLACES:
        raise ValueError(f"key.in must be one of {', '.join(KEY_PLACES)}")
    return config


def parse_key(config: object, *, legacy_header: str | None, create_path: str) -> KeyPlacement:
    """The checked `key` object (header `Idempotency-Key` when absent); ValueError naming the field."""
    config = _key_config(config, legacy_header)
    where = config["in"]
    required = {"property", "duplicate"} if where == "body" else set()
    check_keys(f"key (in {where})", config, {"in"} | required, OPTIONAL_BY_PLACE[where] - required)
    _check_create_path(where, create_path)
    header = config.get("name", "Idempotency-Key") if where == "header" else None
    carrier = config.get("property")
    return KeyPlacement(
        where=where,
        header=header_name("key.name", header) if header is not None else None,
        carrier=check_path("key.property", carrier) if carrier is not None else None,
        duplicate=_duplicate(config["duplicate"]) if where == "body" else None,
    )


@dataclass(frozen=True)
class Search:
    """A lookup by a search that answers a list: the request (`{key}` in its path or body), where the list
    is, and where an entry echoes its key."""

    method: str
    path: str
    body: object
    results: str
    match: str

    def request(self, action_key: str) -> tuple[str, bytes | None]:
        path = self.path.replace(KEY_PLACEHOLDER, quote(action_key, safe=""))
        if self.body is None:
            return path, None
        return path, json.dumps(_filled(self.body, action_key), sort_keys=True).encode()

    def entries(self, answer: object, action_key: str) -> list[object]:
        """The entries of the answer whose echoed key is `action_key` (FieldMissing: no list there)."""
        found = dig(answer, self.results)
        if not isinstance(found, list):
            raise FieldMissing(f"{self.results}: not a list in the answer")
        ours = []
        for entry in found:
            try:
                echoed = dig(entry, self.match)
            except FieldMissing:
                continue
            if str(echoed) == action_key:
                ours.append(entry)
        return ours

    def entry(self, answer: object, action_key: str) -> object:
        """Our entry (None: none is ours); FieldMissing without a list, SeveralEntries for more than one."""
        ours = self.entries(answer, action_key)
        if len(ours) > 1:
            raise SeveralEntries(
                f"{self.results}: {len(ours)} entries for this key: a person compares"
            )
        return ours[0] if ours else None


def _filled(template: object, action_key: str) -> object:
    if isinstance(template, dict):
        return {name: _filled(value, action_key) for name, value in template.items()}
    if isinstance(template, list):
        return [_filled(value, action_key) for value in template]
    if isinstance(template, str):
        return template.replace(KEY_PLACEHOLDER, action_key)
    return template


def _holds_key(template: object) -> bool:
    if isinstance(template, dict):
        return any(_holds_key(value) for value in template.values())
    if isinstance(template, list):
        return any(_holds_key(value) for value in template)
    return isinstance(template, str) and KEY_PLACEHOLDER in template


def parse_search(config: object, url: str, *, results: object, match: object) -> Search:
    """The checked `lookup.search` object with the lookup's `results` and `match`; ValueError naming the
    field."""
    check_keys("lookup.search", config, {"path"}, {"method", "body"})
    method = str(config.get("method", "GET")).upper()
    if method not in {"GET", "POST"}:
        raise ValueError("lookup.search.method must be GET or POST")
    path = config["path"]
    if not isinstance(path, str):
        raise ValueError("lookup.search.path must be a path under url")
    path = relative_path("lookup.search.path", path, url)
    body = config.get("body")
    if body is not None and (method != "POST" or not isinstance(body, dict)):
        raise ValueError("lookup.search.body must be a JSON object, sent with method POST")
    if KEY_PLACEHOLDER not in path and not _holds_key(body):
        raise ValueError("lookup.search must hold '{key}' in its path or its body")
    return Search(
        method=method,
        path=path,
        body=body,
        results=check_path("lookup.results", results),
        match=check_path("lookup.match", match),
    )
