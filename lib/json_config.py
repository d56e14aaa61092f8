"""JSON configuration files read strictly: every configuration file of the product (destinations, the OIDC
role mapping) goes through `load_json_config` or `parse_json_config`.

Python's `json` keeps the last of a key given twice (so `{"name": "sec-dup", "name": "receiver"}` means
"receiver"), reads NaN and Infinity, recurses once per nesting level and reads a file of any size. Here each
of these is a refusal naming where it is: a line and a column, or the JSON path (`destinations[1].name`).
Why the standard library and not another loader: docs/destinations.md, "Why this loader".
"""

import json
import math
import re
from pathlib import Path

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# PostgreSQL's jsonb holds neither NUL nor a lone surrogate: refused here rather than at the write.
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")
# Escapes first, then strings, each replaced by as many blanks: what is left keeps every bracket at its
# offset, in linear time (one pattern for strings with escapes backtracks on an unterminated string).
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*"')
_BRACKET = re.compile(r"[\[\]{}]")


class JsonConfigRefused(ValueError):
    """The file is not a configuration this product reads; the message names the file and the place."""


def json_path(parts: tuple[str | int, ...]) -> str:
    """`("destinations", 1, "headers", "X Bad")` as `destinations[1].headers["X Bad"]`."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            path += f".{part}" if path else part
        else:
            path += f"[{json.dumps(part)}]"
    return path or "(the document)"


def _line_and_column(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"line {line}, column {offset - text.rfind(chr(10), 0, offset)}"


def _blanked(match: re.Match) -> str:
    return " " * len(match.group())


def _check_depth(text: str, source: str, max_depth: int) -> None:
    """Before the parser, which recurses once per level: the first bracket past `max_depth`, by place."""
    plain = _STRING.sub(_blanked, _ESCAPE.sub(_blanked, text))
    depth = 0
    for bracket in _BRACKET.finditer(plain):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > max_depth:
            where = _line_and_column(text, bracket.start())
            raise JsonConfigRefused(f"{source}: {where}: nested deeper than {max_depth} levels")


class _NotJson:
    """What NaN, Infinity or an out-of-range number parse to, so that the walk can say where it is."""

    def __init__(self, text: str):
        self.text = text


class _Duplicated(dict):
    """An object that named a key twice (the walk says where)."""

    twice: str = ""


def _object(pairs: list[tuple[str, object]]) -> dict:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        document = _Duplicated(pairs)
        document.twice = next(key for key, _ in pairs if key in seen or seen.add(key))
    return document


def _number(text: str) -> float | _NotJson:
    value = float(text)
    return value if math.isfinite(value) else _NotJson(text)


def _problem(path: tuple[str | int, ...], value: object) -> str:
    """Where and why the value is refused ("" when it is not)."""
    if isinstance(value, _NotJson):
        return f"{json_path(path)}: {value.text[:40]} is not a JSON number (NaN, Infinity: no)"
    if isinstance(value, _Duplicated):
        return f"{json_path((*path, value.twice))}: the key appears twice in one object"
    if isinstance(value, str) and _UNSTORABLE.search(value):
        return f"{json_path(path)}: a text with a NUL character or a lone surrogate"
    return ""


def _check_values(document: object, source: str) -> None:
    """Walk in document order, without recursion, and refuse the first value the hooks marked."""
    stack: list[tuple[tuple[str | int, ...], object]] = [((), document)]
    while stack:
        path, value = stack.pop()
        if problem := _problem(path, value):
            raise JsonConfigRefused(f"{source}: {problem}")
        if isinstance(value, dict):
            for key in value:
                if _UNSTORABLE.search(key):
                    raise JsonConfigRefused(f"{source}: {_problem((*path, key), key)} (in a key)")
            stack += [((*path, k), v) for k, v in reversed(value.items())]
        elif isinstance(value, list):
            stack += [((*path, i), v) for i, v in reversed(list(enumerate(value)))]


def parse_json_config(text: str, *, source: str, max_depth: int = MAX_DEPTH) -> object:
    """The document in `text` (`source` names it in messages); JsonConfigRefused naming where it is wrong."""
    _check_depth(text, source, max_depth)
    try:
        document = json.loads(
            text, parse_constant=_NotJson, parse_float=_number, object_pairs_hook=_object
        )
    except json.JSONDecodeError as exc:
        raise JsonConfigRefused(
            f"{source}: line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except ValueError as exc:  # an integer longer than Python converts
        raise JsonConfigRefused(f"{source}: {str(exc)[:200]}") from None
    _check_values(document, source)
    return document


def load_json_config(
    path: str | Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> object:
    """The document in the file at `path`, read whole only when it is at most `max_bytes` of UTF-8."""
    try:
        with open(path, "rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise JsonConfigRefused(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > max_bytes:
        raise JsonConfigRefused(f"{path}: larger than {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8")
        where = _line_and_column(before, len(before))
        raise JsonConfigRefused(f"{path}: {where}: not UTF-8") from None
    return parse_json_config(text, source=str(path), max_depth=max_depth)
