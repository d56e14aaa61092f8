"""{{ value|json_pretty }}: a payload shown as the JSON that is sent, indented, keys sorted.
{{ value|evidence_lines }}: what a finding's source or receiver says, as field: value lines a person reads.
{% hidden_fields original shown as hidden %}: which fields redaction hid, what kind of value each is, why.

Callers pass values that went through the redaction function already."""

import json

from django import template
from django.utils.dateparse import parse_datetime

from outbox.redaction import CREDENTIAL_KEY_PARTS, PERSONAL_KEY_PARTS

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


# What a hidden field holds, by the part of its name that hid it (`outbox.redaction`), credentials first:
# an `email_token` is a token.
_KINDS = {
    "password": "a password",
    "secret": "a secret",
    "token": "a secret token",
    "authorization": "an authorization header",
    "api_key": "an API key",
    "apikey": "an API key",
    "signature": "a signature",
    "email": "an e-mail address",
    "phone": "a phone number",
    "iban": "a bank account number (IBAN)",
    "tax": "a tax number",
    "ssn": "a social security number",
    "birth": "a date of birth",
    "passport": "a passport number",
    "card": "a card number",
}
CREDENTIAL_WHY = "a credential: hidden from every screen and log; the receiver gets it"
PERSONAL_WHY = (
    "personal data: shown only to the requester who typed it, hidden from every other screen and "
    "log; the receiver gets it"
)
MASKED_TEXT_WHY = (
    "its text holds an e-mail address or a secret, masked where it appears; the receiver gets the "
    "whole text"
)


def _what_is_hidden(key: str) -> tuple[str, str]:
    lowered = key.lower()
    for parts, why in ((CREDENTIAL_KEY_PARTS, CREDENTIAL_WHY), (PERSONAL_KEY_PARTS, PERSONAL_WHY)):
        for part in parts:
            if part in lowered:
                return _KINDS[part], why
    return "text", MASKED_TEXT_WHY


@register.simple_tag
def hidden_fields(original, shown) -> list[dict]:
    """The top-level fields of a payload that redaction changed, each with what kind of value it is and why
    it is hidden: a person approving or repairing "exactly this payload" is told what they do not see (the
    receiver gets the real value, and the payload hash covers it). Names and kinds only, never a value."""
    if not isinstance(original, dict) or not isinstance(shown, dict):
        return []
    hidden = []
    for key, value in original.items():
        if shown.get(key) != value:
            kind, why = _what_is_hidden(str(key))
            hidden.append({"field": str(key), "kind": kind, "why": why})
    return hidden
