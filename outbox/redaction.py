"""The one redaction function: everything shown to operators or written to logs goes through it."""

from typing import Any

import re2

REDACTED = "[redacted]"
TOO_DEEP = "[nested too deep to show]"
# Deeper than any payload the APIs accept now (they refuse JSON nested past 32 levels), so only values
# stored before that limit are cut; the bound keeps every page renderable whatever is stored.
MAX_DEPTH = 64

# Keys whose values are personal data or secrets. Matched on the lower-cased key, by substring.
SENSITIVE_KEY_PARTS = (
    "password",
    "secret",
    "token",
    "authorization",
    "api_key",
    "apikey",
    "signature",
    "email",
    "phone",
    "iban",
    "tax",
    "ssn",
    "birth",
    "passport",
    "card",
)

# RE2, not `re`: the text is a receiver's answer or a stored payload, and with backtracking the e-mail pattern
# took time quadratic in a long run of address characters (2 s for 40,000 of them). RE2 is linear.
_WHSEC = re2.compile(r"whsec_[A-Za-z0-9+/=]+")
_BEARER = re2.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]+")
_EMAIL = re2.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def _is_sensitive(key: str) -> bool:
    lowered = key.lower()
    return any(part in lowered for part in SENSITIVE_KEY_PARTS)


def redact_text(text: str) -> str:
    text = _WHSEC.sub(REDACTED, text)
    text = _BEARER.sub("Bearer " + REDACTED, text)
    return _EMAIL.sub(REDACTED, text)


def redact(value: Any, *, max_depth: int = MAX_DEPTH) -> Any:
    """Return a copy of `value` with sensitive keys masked and secrets removed from strings.

    Containers nested deeper than `max_depth` are replaced by a marker: the recursion is bounded, so
    no stored value can make a page fail.
    """
    if isinstance(value, dict | list | tuple) and max_depth < 1:
        return TOO_DEEP
    if isinstance(value, dict):
        return {
            k: (REDACTED if _is_sensitive(str(k)) else redact(v, max_depth=max_depth - 1))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, max_depth=max_depth - 1) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
