"""Strict JSON: only documents that every later step (hashing, storing, rendering) can handle.

Python's `json` accepts what RFC 8259 does not (NaN, Infinity), keeps the last of a key given twice,
turns 1e999 into an infinite float,
lets lone surrogates and NUL through (PostgreSQL refuses both in jsonb) and recurses once per nesting
level. Each of these used to surface as a 500 somewhere later; here it is a refusal with a reason.
"""

import json
import math
import re
from dataclasses import dataclass
from itertools import accumulate

_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")
# Escapes go first, so that a string is then just quote, no quote, quote: both patterns run in linear
# time, where one pattern for strings with escapes backtracks quadratically on unterminated strings.
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*"')
_BRACKET = re.compile(r"[\[\]{}]")


@dataclass
class JSONRejected(Exception):
    """Why the text is not an acceptable JSON document. `code` names the kind of refusal."""

    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


def _no_constant(name: str):
    raise JSONRejected("malformed_json", f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONRejected("malformed_json", f"the number {text[:40]} is out of range")
    return value


def _object_without_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    """An object whose keys are unique. With a key twice, parsers disagree on which value counts (Python's
    takes the last, others the first): `{"workspace_id": 8, "workspace_id": 7}` must not mean 7 here and 8
    to whoever reads the same signed body next."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise JSONRejected("malformed_json", f"the key {twice[:40]!r} appears twice in one object")
    return document


def _check_string(text: str) -> None:
    if _UNSTORABLE.search(text):
        raise JSONRejected("malformed_json", "strings must be valid Unicode without NUL characters")


def _check_strings(value: object) -> None:
    """Walk without recursion and refuse strings (keys too) that cannot be stored."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in node:
                _check_string(key)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            _check_string(node)


def nesting_depth(text: str) -> int:
    """How deep the brackets of `text` nest, strings left out. Linear and without recursion, so it can
    run before the parser, which recurses once per level."""
    brackets = _BRACKET.findall(_STRING.sub("", _ESCAPE.sub("", text)))
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0)


def parse_json_object(text: str, *, max_depth: int) -> dict:
    """The JSON object in `text`. Raises JSONRejected for anything else."""
    document = parse_json(text, max_depth=max_depth)
    if not isinstance(document, dict):
        raise JSONRejected("malformed_json", "the body must be a JSON object")
    return document


def parse_json(text: str | bytes, *, max_depth: int) -> object:
    """The JSON value in `text` (an object, a list or a scalar), held to the same rules: what a
    destination or a token endpoint answers. Raises JSONRejected for anything else."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise JSONRejected("malformed_json", "the body is not UTF-8") from None
    if nesting_depth(text) > max_depth:
        raise JSONRejected("json_too_deep", f"JSON may nest at most {max_depth} levels")
    try:
        document = json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            object_pairs_hook=_object_without_duplicate_keys,
        )
    except ValueError as exc:
        # Includes integers longer than Python converts (sys.get_int_max_str_digits).
        raise JSONRejected("malformed_json", str(exc)[:200]) from None
    _check_strings(document)
    return document
