"""{{ value|json_pretty }}: a payload shown as the JSON that is sent, indented, keys sorted.
{{ value|evidence_lines }}: what a finding's source or receiver says, as field: value lines a person reads.
{% hidden_fields original shown as hidden %}: which fields redaction hid, what each is and why.

Callers pass values that went through the redaction function already."""

import json

from django import template
from django.utils.dateparse import parse_datetime

from outbox.redaction import SENSITIVE_KEY_PARTS

register = template.Library()


@register.filter
def json_pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _shown(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    at = _timestamp(value)
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else str(value)


def _timestamp(value):
    """An ISO time the evidence recorded (UTC), or None for any other value."""
    if not isinstance(value, str) or len(value) < 19 or value[10:11] != "T":
        return None
    try:
        at = parse_datetime(value)
    except ValueError:
        return None
    return at if at is not None and at.utcoffset() is not None and not at.utcoffset() else None


@register.filter
def evidence_lines(value) -> list[tuple[str, str]]:
    """A finding's evidence as (field, value) lines in the order it was recorded: `payload_hash` reads
    "payload hash", an empty value "—", an ISO time "2026-12-01 16:25:28 UTC", a nested value compact
    JSON. Raw JSON in a table cell was unreadable and made the handoff page wider than the window."""
    if isinstance(value, dict):
        return [(str(key).replace("_", " "), _shown(item)) for key, item in value.items()]
    if value is None or value in ("", []):
        return []
    return [("value", _shown(value))]


# What a hidden field is, by the part of its name that hid it (`outbox.redaction.SENSITIVE_KEY_PARTS`).
_SECRET_PARTS = ("password", "secret", "token", "authorization", "api_key", "apikey", "signature")


def _why_hidden(key: str) -> str:
    lowered = key.lower()
    if any(part in lowered for part in _SECRET_PARTS):
        return "a credential: never shown"
    if any(part in lowered for part in SENSITIVE_KEY_PARTS):
        return "personal data: hidden on screens and in logs"
    return "its text holds an e-mail address or a secret, masked where it appears"


@register.simple_tag
def hidden_fields(original, shown) -> list[dict]:
    """The top-level fields of a payload that redaction changed, each with what it is and why it is
    hidden: a person approving or repairing "exactly this payload" is told what they do not see (the
    receiver gets the real value, and the payload hash covers it). Names only, never a value."""
    if not isinstance(original, dict) or not isinstance(shown, dict):
        return []
    return [
        {"field": str(key), "why": _why_hidden(str(key))}
        for key, value in original.items()
        if shown.get(key) != value
    ]
