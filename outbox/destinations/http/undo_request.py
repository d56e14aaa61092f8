"""A destination's undo request: how a compensation reverses a delivered step (`DELETE /v1/accounts/{receipt_id}`,
`POST /v1/accounts/{receipt_id}/close` with a mapped body), configured as the `undo` object of a destination
(docs/destinations.md). A compensation handoff at such a destination sends this request under its own key,
never the create. Pure: the configuration checked whole, and the request it makes for one step.

Placeholders: `{receipt_id}` (the id the step's create returned), `{action_key}` (the step's key), and in the
body's string values also `{payload.<field>}` (a field of the approved payload). A body value that is one
placeholder alone takes the value as it is (a number stays a number); in a longer text it is written as text.
"""

import json
import re
from dataclasses import dataclass
from urllib.parse import quote

from outbox.destinations.idempotency_key.auth import check_keys
from outbox.failures import UndoTarget

UNDO_KEYS = {"path"}
UNDO_OPTIONAL = {"method", "body", "success", "receipt_id"}
UNDO_METHODS = {"DELETE", "POST"}
# 404: already gone, which is what the undo wanted.
DEFAULT_SUCCESS = (200, 202, 204, 404)
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
PATH_NAMES = {"receipt_id", "action_key"}


class UndoUnfilled(ValueError):
    """A body placeholder names a payload field the step's payload does not hold."""


@dataclass(frozen=True)
class UndoRequest:
    method: str
    path: str
    body: dict | None
    success: frozenset[int]
    # Where the answer holds the id of what was undone (dotted path); None: the step's receipt id.
    receipt_id: str | None = None

    def path_for(self, target: UndoTarget) -> str:
        values = {"receipt_id": target.receipt_id, "action_key": target.action_key}
        return PLACEHOLDER.sub(lambda m: quote(values[m.group(1)], safe=""), self.path)

    def body_for(self, target: UndoTarget, payload: dict) -> bytes | None:
        if self.body is None:
            return None
        return json.dumps(_filled(self.body, target, payload), sort_keys=True).encode()

    def describe(self) -> str:
        return f"undo by {self.method} {self.path}"

    def payload_fields(self) -> frozenset[str]:
        """The payload fields its body names (`{payload.<field>}`; its path may name none)."""
        return frozenset(_payload_names(self.body))


def _value(name: str, target: UndoTarget, payload: dict) -> object:
    if name == "receipt_id":
        return target.receipt_id
    if name == "action_key":
        return target.action_key
    field = name.removeprefix("payload.")
    if field not in payload:
        raise UndoUnfilled(
            f"undo.body names payload.{field}, which the step's payload does not hold"
        )
    return payload[field]


def _payload_names(template: object):
    if isinstance(template, dict):
        template = list(template.values())
    if isinstance(template, list):
        for value in template:
            yield from _payload_names(value)
    elif isinstance(template, str):
        for name in PLACEHOLDER.findall(template):
            if name.startswith("payload."):
                yield name.removeprefix("payload.")


def _filled(template: object, target: UndoTarget, payload: dict) -> object:
    if isinstance(template, dict):
        return {key: _filled(value, target, payload) for key, value in template.items()}
    if isinstance(template, list):
        return [_filled(value, target, payload) for value in template]
    if not isinstance(template, str):
        return template
    whole = PLACEHOLDER.fullmatch(template)
    if whole:
        return _value(whole.group(1), target, payload)
    return PLACEHOLDER.sub(lambda m: str(_value(m.group(1), target, payload)), template)


def _check_placeholders(where: str, text: str, *, payload_fields: bool) -> None:
    for name in PLACEHOLDER.findall(text):
        if name in PATH_NAMES or (payload_fields and re.fullmatch(r"payload\.\w+", name)):
            continue
        allowed = "{receipt_id}, {action_key}" + (", {payload.<field>}" if payload_fields else "")
        raise ValueError(f"{where}: unknown placeholder {{{name}}} (allowed: {allowed})")


def _check_body(where: str, body: object) -> None:
    if isinstance(body, dict):
        for key, value in body.items():
            _check_body(f"{where}.{key}", value)
    elif isinstance(body, list):
        for index, value in enumerate(body):
            _check_body(f"{where}.{index}", value)
    elif isinstance(body, str):
        _check_placeholders(where, body, payload_fields=True)


def _success(config: dict) -> frozenset[int]:
    success = config.get("success", list(DEFAULT_SUCCESS))
    if (
        not isinstance(success, list)
        or not success
        or not all(
            isinstance(s, int) and not isinstance(s, bool) and 200 <= s <= 499 for s in success
        )
    ):
        raise ValueError(
            "undo.success must be a non-empty list of statuses, such as [200, 204, 404]"
        )
    return frozenset(success)


def parse_undo(config: object) -> UndoRequest | None:
    """The checked `undo` object (None when absent); ValueError naming the field that is wrong."""
    if config is None:
        return None
    check_keys("undo", config, UNDO_KEYS, UNDO_OPTIONAL)
    method = str(config.get("method", "DELETE")).upper()
    if method not in UNDO_METHODS:
        raise ValueError(f"undo.method must be DELETE or POST, not {config.get('method')!r}")
    path = config["path"]
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"undo.path must be a path starting with '/', not {path!r}")
    _check_placeholders("undo.path", path, payload_fields=False)
    body = config.get("body")
    if body is not None:
        if not isinstance(body, dict):
            raise ValueError("undo.body must be a JSON object")
        _check_body("undo.body", body)
    receipt_id = config.get("receipt_id")
    if receipt_id is not None and (not isinstance(receipt_id, str) or not receipt_id):
        raise ValueError("undo.receipt_id must be a dotted path such as 'account.id'")
    return UndoRequest(
        method=method, path=path, body=body, success=_success(config), receipt_id=receipt_id
    )
