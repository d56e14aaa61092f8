"""The one rule for control characters in text people and peers type (forms, the intake API, the rules'
fields), with a Django validator for form fields.

A single-line field (a name, a reference, an e-mail address) holds no character of Unicode's control and
format categories (Cc, Cf: CR, LF, NUL, TAB, the bidi overrides U+202A–U+202E and isolates U+2066–U+2069,
zero-width characters) and no line or paragraph separator (U+2028, U+2029): a client name ending
"\\r\\nBcc: victim@evil.example" became a header of the welcome mail, and a bidi override shows a reader
other text than is stored. A multi-line field (a reason, notes) keeps its line breaks and TABs but refuses
the other control characters (NUL among them) and the bidi controls.
"""

import unicodedata

from django.core.exceptions import ValidationError

SINGLE_LINE_REFUSED = {"Cc", "Cf", "Cs", "Zl", "Zp"}
MULTI_LINE_KEPT = {"\t", "\n", "\r", "\u2028", "\u2029"}
BIDI_CONTROLS = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F)}


def _refused(char: str, multiline: bool) -> bool:
    category = unicodedata.category(char)
    if not multiline:
        return category in SINGLE_LINE_REFUSED
    return char not in MULTI_LINE_KEPT and (category in ("Cc", "Cs") or char in BIDI_CONTROLS)


def control_character_problem(text: str, *, multiline: bool = False) -> str | None:
    """Why `text` cannot be taken (the first character refused and where), or None when it can."""
    for position, char in enumerate(text, start=1):
        if _refused(char, multiline):
            kind = "control characters" if multiline else "line breaks or control characters"
            return f"must hold no {kind} (U+{ord(char):04X} at character {position})"
    return None


def validate_single_line(value: str) -> None:
    """Django validator of a single-line form field."""
    if problem := control_character_problem(value):
        raise ValidationError(problem, code="control_character")


def validate_multi_line(value: str) -> None:
    """Django validator of a multi-line form field (a reason, notes)."""
    if problem := control_character_problem(value, multiline=True):
        raise ValidationError(problem, code="control_character")


_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escaped_for_one_line(text: str) -> str:
    """`text` with every character a single-line field refuses written as an escape (`\\n`, `\\u2028`): a
    plain log line stays one line whatever value it quotes, and shows what a bidi control hid."""
    if text.isprintable():
        return text
    return "".join(
        _SHORT_ESCAPES.get(char, f"\\u{ord(char):04x}") if _refused(char, False) else char
        for char in text
    )
