"""httpapi/strict_json.py reads a document's structure from its bytes and parses it with the C parser,
walking its strings only when an escape could hide NUL or a lone surrogate: whatever the text, it must
accept and refuse exactly what the rules it states accept and refuse, with the same reason. The reference
below is those rules as they were written before the quick reading: a regex-stripped depth, every object
built through a duplicate-key hook, every string walked."""

import json
import math
import re
from itertools import accumulate

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from httpapi.strict_json import JSONRejected, nesting_depth, parse_json, parse_json_object

_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


def reference_depth(text: str) -> int:
    text = re.sub(r'"[^"]*"', "", re.sub(r"\\.", "", text, flags=re.DOTALL))
    brackets = re.findall(r"[\[\]{}]", text)
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0)


def _refuse(code: str, detail: str):
    raise JSONRejected(code, detail)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        _refuse("malformed_json", f"the number {text[:40]} is out of range")
    return value


def _unique(pairs):
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        _refuse("malformed_json", f"the key {twice[:40]!r} appears twice in one object")
    return document


def _walk(value) -> None:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and _UNSTORABLE.search(node):
            _refuse("malformed_json", "strings must be valid Unicode without NUL characters")


def reference_parse(text: str | bytes, max_depth: int) -> object:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            _refuse("malformed_json", "the body is not UTF-8")
    if reference_depth(text) > max_depth:
        _refuse("json_too_deep", f"JSON may nest at most {max_depth} levels")
    try:
        document = json.loads(
            text,
            parse_constant=lambda name: _refuse("malformed_json", f"{name} is not JSON"),
            parse_float=_finite,
            object_pairs_hook=_unique,
        )
    except ValueError as exc:
        _refuse("malformed_json", str(exc)[:200])
    _walk(document)
    return document


def outcome(parse, text, max_depth: int):
    """What a parser makes of the text: the document with every object's key order, or the refusal."""
    try:
        return "accepted", json.dumps(parse(text, max_depth))
    except JSONRejected as refused:
        return "refused", refused.code, refused.detail


def assert_same_outcome(text: str, max_depth: int = 4) -> None:
    expected = outcome(reference_parse, text, max_depth)
    assert outcome(lambda t, d: parse_json(t, max_depth=d), text, max_depth) == expected
    encoded = text.encode("utf-8", "surrogatepass")
    assert outcome(lambda t, d: parse_json(t, max_depth=d), encoded, max_depth) == outcome(
        reference_parse, encoded, max_depth
    )


# Strings that stress each shortcut: brackets and colons inside them, escaped quotes and backslashes, the
# escapes that make NUL or a lone surrogate (and those that only look like them), a surrogate pair, raw
# non-ASCII and a raw lone surrogate.
STRINGS = st.sampled_from(
    [
        '""',
        '"a"',
        '"a:b:c"',
        '"[{"',
        '"]}"',
        '"\\""',
        '"\\\\"',
        '"\\\\\\""',
        '"\\u0000"',
        '"\\\\u0000"',
        '"\\ud800"',
        '"\\uDFFF"',
        '"\\udbff\\udfff"',
        '"\\ud83d\\ude00"',
        '"\\u00e9"',
        '"\\u0041"',
        '"é:["',
        '"\ud800"',
        '"\x00"',
        '"a\\nb"',
    ]
)
SCALARS = STRINGS | st.sampled_from(
    [
        "0",
        "-1",
        "1.5",
        "1e999",
        "-1e400",
        "NaN",
        "Infinity",
        "-Infinity",
        "true",
        "null",
        "1" * 5000,
    ]
)
# Keys from a small set, so that a key twice in one object is common.
KEYS = st.sampled_from(['"k"', '"k"', '"j"', '"k:"', '"\\u006b"', '"\\u0000"', '"[k"'])


def _container(children):
    items = st.lists(children, max_size=4)
    members = st.lists(st.tuples(KEYS, children), max_size=4)
    return items.map(lambda xs: "[" + ",".join(xs) + "]") | members.map(
        lambda ms: "{" + ",".join(f"{k}:{v}" for k, v in ms) + "}"
    )


JSON_TEXTS = st.recursive(SCALARS, _container, max_leaves=25)


@settings(max_examples=400)
@given(JSON_TEXTS, st.integers(min_value=0, max_value=6))
def test_well_formed_texts_are_accepted_and_refused_as_the_rules_say(text, max_depth):
    assert_same_outcome(text, max_depth)


@settings(max_examples=400)
@given(JSON_TEXTS, st.sampled_from(["", " ", "x", "]", "}", ",", '"', "\\", "{", "[", ":1}"]))
def test_a_broken_text_is_refused_with_the_same_reason(text, tail):
    assert_same_outcome(text + tail)
    assert_same_outcome(tail + text)


@settings(max_examples=600)
@given(st.text(alphabet=st.sampled_from('"\\[]{}:,ku0dD8 1Né\ud800\x00'), max_size=40))
@example('"\\"[[')
@example(']"[[')
@example('"a":[')
def test_any_text_gets_the_reference_outcome_and_depth(text):
    assert nesting_depth(text) == reference_depth(text)
    assert_same_outcome(text, max_depth=2)


def test_a_listing_page_is_the_document_it_holds():
    items = [
        {
            "action_key": f"ticket:7:{n:012d}",
            "task_id": str(n),
            "payload_hash": "ab" * 32,
            "status": "open",
        }
        for n in range(2000)
    ]
    body = json.dumps({"items": items, "next_after": "ticket:7:[{"}).encode()
    assert parse_json(body, max_depth=8) == {"items": items, "next_after": "ticket:7:[{"}


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ('{"items": [{"k": 1, "k": 2}]}', "the key 'k' appears twice in one object"),
        ('{"a:b": 1, "a:b": 2}', "the key 'a:b' appears twice in one object"),
        ('{"\\u006b": 1, "k": 2}', "the key 'k' appears twice in one object"),
        ('{"a": "\\u0000"}', "strings must be valid Unicode without NUL characters"),
        ('{"a": ["\\udc00"]}', "strings must be valid Unicode without NUL characters"),
        ('{"\ud800": 1}', "strings must be valid Unicode without NUL characters"),
    ],
)
def test_what_the_quick_reading_lets_through_the_checks_still_refuse(text, detail):
    with pytest.raises(JSONRejected) as refused:
        parse_json_object(text, max_depth=8)
    assert (refused.value.code, refused.value.detail) == ("malformed_json", detail)
