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
# The only escapes that can put an unstorable character in a string (NUL, a surrogate): a text without
# them (nor raw surrogates) needs no walk through its strings. `\\u0000` also matches: then the walk decides.
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
# The document's skeleton is read from its UTF-8 bytes, where quotes, brackets, colons and backslashes are
# single bytes that no other character's bytes contain. Escapes go first, so that a string is then just
# quote, no quote, quote (one pattern for strings with escapes backtracks quadratically on unterminated
# strings).
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_NOT_SKELETON = bytes(sorted(set(range(256)) - set(b'"[]{}:')))
_STEP = tuple(1 if byte in b"[{" else -1 if byte in b"]}" else 0 for byte in range(256))


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


def _skeleton(data: bytes) -> bytes:
    """The brackets and colons of a JSON text (as UTF-8) outside its strings, in order: its structure. In C
    (a regex only where there are escapes, translate, split, join), not a character at a time."""
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    # Split at the quotes, every other piece is outside the strings: each quote paired with the next, as a
    # regex for strings (`"[^"]*"`) pairs them, without a match built a string. A last quote left without a
    # pair opens no string: what follows it counts.
    pieces = data.translate(None, _NOT_SKELETON).split(b'"')
    outside = b"".join(pieces[::2])
    return outside + pieces[-1] if len(pieces) % 2 == 0 else outside


def _depth(skeleton: bytes) -> int:
    return max(accumulate(map(_STEP.__getitem__, skeleton.translate(None, b":"))), default=0)


def nesting_depth(text: str) -> int:
    """How deep the brackets of `text` nest, strings left out. Linear and without recursion, so it can
    run before the parser, which recurses once per level."""
    return _depth(_skeleton(text.encode("utf-8", "surrogatepass")))


def parse_json_object(text: str, *, max_depth: int) -> dict:
    """The JSON object in `text`. Raises JSONRejected for anything else."""
    document = parse_json(text, max_depth=max_depth)
    if not isinstance(document, dict):
        raise JSONRejected("malformed_json", "the body must be a JSON object")
    return document


def parse_json(text: str | bytes, *, max_depth: int) -> object:
    """The JSON value in `text` (an object, a list or a scalar), held to the same rules: what a
    destination or a token endpoint answers. Raises JSONRejected for anything else.

    A document is parsed by the C parser with its objects counted, not built from pairs by a Python hook:
    its members (its colons outside strings) all kept means no key came twice. Its strings are walked only
    when the text could put NUL or a lone surrogate in one. Any refusal, or a key twice, is parsed again by
    `_parse_checked`, which every check runs on, so the reason given is the same."""
    if isinstance(text, bytes):
        data = text
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise JSONRejected("malformed_json", "the body is not UTF-8") from None
        # The UTF-8 decoder refuses surrogates; the parser refuses raw NUL (a control character).
        raw_unstorable = False
    else:
        data = text.encode("utf-8", "surrogatepass")
        raw_unstorable = not text.isascii() and _UNSTORABLE.search(text) is not None
    skeleton = _skeleton(data)
    if _depth(skeleton) > max_depth:
        raise JSONRejected("json_too_deep", f"JSON may nest at most {max_depth} levels")
    sizes: list[int] = []
    count = sizes.append

    def counted(obj: dict) -> dict:
        count(len(obj))
        return obj

    try:
        document = json.loads(
            text, parse_constant=_no_constant, parse_float=_finite_float, object_hook=counted
        )
    except (ValueError, JSONRejected):
        return _parse_checked(text)
    if sum(sizes) != skeleton.count(b":"):
        return _parse_checked(text)
    if raw_unstorable or (b"\\u" in data and _UNSTORABLE_ESCAPE.search(data)):
        _check_strings(document)
    return document


def _parse_checked(text: str) -> object:
    """The document parsed with every check on the way (a key twice refused as its object closes) and its
    strings walked after: what `parse_json` gives when the quick reading finds anything amiss."""
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
