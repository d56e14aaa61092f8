"""The one redaction function: everything shown to operators or written to logs goes through it."""

import functools
import os
from typing import Any

import re2
from django.conf import settings

from lib.request_memo import RequestMemo

REDACTED = "[redacted]"
TOO_DEEP = "[nested too deep to show]"
# Deeper than any payload the APIs accept now (they refuse JSON nested past 32 levels), so only values
# stored before that limit are cut; the bound keeps every page renderable whatever is stored.
MAX_DEPTH = 64

# Keys whose values are secrets or personal data. Matched on the lower-cased key, by substring.
CREDENTIAL_KEY_PARTS = (
    "password",
    "secret",
    "token",
    "authorization",
    "api_key",
    "apikey",
    "signature",
)
PERSONAL_KEY_PARTS = (
    "email",
    "phone",
    "iban",
    "tax",
    "ssn",
    "birth",
    "passport",
    "card",
)
SENSITIVE_KEY_PARTS = CREDENTIAL_KEY_PARTS + PERSONAL_KEY_PARTS

# RE2, not `re`: the text is a receiver's answer or a stored payload, and with backtracking the e-mail pattern
# took time quadratic in a long run of address characters (2 s for 40,000 of them). RE2 is linear.
_WHSEC = re2.compile(r"whsec_[A-Za-z0-9+/=]+")
_BEARER = re2.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]+")
_EMAIL = re2.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
# A URL's query parameter (after `?` or `&`): a credential passed in the URL (`/metrics?token=`, an OAuth
# callback's code and state, a presigned link's signature) is masked in access logs and log lines.
_QUERY_PARAMETER = re2.compile(r"([?&])([^=&?#\s\"'<>]+)=([^&#\s\"'<>]*)")
# Named like a credential whatever else they are called (OAuth's code and state, a bare key or sig).
_CREDENTIAL_PARAMETERS = {
    "key",
    "code",
    "state",
    "sig",
    "pwd",
    "passwd",
    "auth",
    "session",
    "jwt",
    "otp",
}
_CREDENTIAL_PARAMETER_PARTS = (*CREDENTIAL_KEY_PARTS, "credential", "passwd")
# Keys that name a record, not a credential: our action keys, the accounts service's lookup.
_NOT_CREDENTIAL_PARAMETERS = {"action_key", "idempotency_key"}


# Secrets come from the environment or a secrets file, never from the database: the exact value of every
# configured one is masked wherever it appears, even typed verbatim into a payload's free text.
SECRET_SETTINGS = (
    "SECRET_KEY",
    "METRICS_TOKEN",
    "RECEIVER_SIGNING_SECRET",
    "RECEIVER_SIGNING_SECRET_PREVIOUS",
    "INTAKE_SIGNING_SECRET",
    "INTAKE_SIGNING_SECRET_PREVIOUS",
    "ALERT_WEBHOOK_SECRET",
    "ALERT_PAGE_WEBHOOK_SECRET",
    "ACCOUNTS_API_TOKEN",
    "ACCOUNTS_API_TOKEN_PREVIOUS",
)
# Environment variables whose name says they hold a secret (a destination's token or password variable).
_SECRET_NAME = re2.compile(r"(?i)(secret|token|password|passwd|api_?key|private_?key)")
# Shorter values are not masked: they would mask ordinary words.
MIN_SECRET_LENGTH = 8
_secret_names: tuple[frozenset, tuple[str, ...]] = (frozenset(), ())


def _environment_secret_names() -> tuple[str, ...]:
    """The names of the environment's secret variables, searched again only when the environment's names
    change (a rotated value under the same name is read at every call). Keyed on the names themselves: a
    variable removed and another added keep the count, not the names. The names are compared as the
    environment stores them (`os.environ._data`, encoded): `tuple(os.environ)` decoded every name at every
    read, 35 us for 75 variables, against 3 us for the comparison; `os.environ[...] = ...`, `del` and
    `monkeypatch.setenv` all change that mapping."""
    global _secret_names
    stored = os.environ._data  # the mapping os.environ itself reads and writes
    if stored.keys() != _secret_names[0]:
        names = tuple(os.environ)
        _secret_names = (frozenset(stored), tuple(n for n in names if _SECRET_NAME.search(n)))
    return _secret_names[1]


_secrets_cache: tuple[tuple, list[str]] = ((), [])
# Within one request (a page of fifty rows, each with strings to mask) the secrets are read once, when first
# asked: reading them (every setting, the environment's names and values) cost more than masking a short string.
_secrets = RequestMemo("secrets")
# Middleware: the configured secrets read at most once per request; outside a request, at every call.
secrets_read_once_per_request = _secrets.middleware
# Outside a request, the same for a block: a JSON log line redacts each of its fields (6 reads of every secret
# setting and of the environment a line, 58% of its CPU before), the dispatcher's record step a line per outcome.
secrets_read_once_within = _secrets.scope


def configured_secrets() -> list[str]:
    """The exact values of the configured secrets (and of a whsec_ secret, its key without the prefix),
    longest first so that a secret containing another is masked whole. Redaction runs on every string a
    page or a log shows: the list is rebuilt only when one of the values changed (a rotation), and read
    once per request inside one (`secrets_read_once_per_request`) or per block (`secrets_read_once_within`)."""
    return _secrets.get("secrets", _read_configured_secrets)


def _read_configured_secrets() -> list[str]:
    global _secrets_cache
    raw = tuple(getattr(settings, name, "") for name in SECRET_SETTINGS) + tuple(
        os.environ.get(name, "") for name in _environment_secret_names()
    )
    if raw != _secrets_cache[0]:
        values = {v for v in raw if isinstance(v, str)}
        values |= {v.removeprefix("whsec_") for v in values}
        kept = sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)
        _secrets_cache = (raw, kept)
    return _secrets_cache[1]


def _mask_configured(text: str) -> str:
    for secret in configured_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


# Longer field names are checked each time: the cache's memory stays bounded whatever keys a payload holds.
_CACHED_NAME_LENGTH = 64


def _is_sensitive(key: str, *, keep_personal: bool = False) -> bool:
    parts = CREDENTIAL_KEY_PARTS if keep_personal else SENSITIVE_KEY_PARTS
    if len(key) > _CACHED_NAME_LENGTH:
        return _names_a_part(key, parts)
    return _names_a_part_cached(key, parts)


def _names_a_part(key: str, parts: tuple[str, ...]) -> bool:
    lowered = key.lower()
    return any(part in lowered for part in parts)


# A JSON log line checked each of its ten field names against the 15 parts at every line (a fifth of its
# fields' redaction); the same few names come back on every line and payload. The answer depends on the name
# and the parts only, and the parts are in the key: parts replaced at run time are never answered from old ones.
_names_a_part_cached = functools.lru_cache(maxsize=1024)(_names_a_part)


def _is_credential_parameter(name: str) -> bool:
    lowered = name.lower().replace("-", "_")
    if lowered in _NOT_CREDENTIAL_PARAMETERS:
        return False
    return (
        lowered in _CREDENTIAL_PARAMETERS
        or lowered.endswith("_key")
        or any(part in lowered for part in _CREDENTIAL_PARAMETER_PARTS)
    )


def _masked_parameter(match) -> str:
    separator, name, _value = match.groups()
    return f"{separator}{name}={REDACTED}" if _is_credential_parameter(name) else match.group(0)


def redact_query_parameters(text: str) -> str:
    """`text` with the value of every URL query parameter named like a credential replaced by [redacted]
    (`/metrics?token=[redacted]&x=1`). Needs no settings: gunicorn's access log calls it too."""
    if "=" not in text:
        return text
    return _QUERY_PARAMETER.sub(_masked_parameter, text)


def redact_text(text: str, *, keep_personal: bool = False) -> str:
    if not text:
        return text  # a delivery's attempt has no detail: nothing to mask, no secrets to read
    # Each pattern runs only on a text holding the part it cannot match without ("whsec_", "bearer", "@"):
    # a call into RE2 costs more than the search, and most strings shown (a client's name) hold none.
    text = redact_query_parameters(_mask_configured(text))
    if "whsec_" in text:
        text = _WHSEC.sub(REDACTED, text)
    if "bearer" in text.lower():
        text = _BEARER.sub("Bearer " + REDACTED, text)
    return text if keep_personal or "@" not in text else _EMAIL.sub(REDACTED, text)


def redact(value: Any, *, max_depth: int = MAX_DEPTH, keep_personal: bool = False) -> Any:
    """Return a copy of `value` with sensitive keys masked and secrets removed from strings.

    `keep_personal`: personal data stays (an e-mail address, a phone number), secrets are masked as
    everywhere. Only for showing a person what they typed themselves (`console/own_fields.py`): their own
    e-mail address is theirs to read back, a token they pasted is still nobody's to see on a screen.

    Containers nested deeper than `max_depth` are replaced by a marker: the recursion is bounded, so
    no stored value can make a page fail.
    """
    if isinstance(value, dict | list | tuple) and max_depth < 1:
        return TOO_DEEP
    deeper = {"max_depth": max_depth - 1, "keep_personal": keep_personal}
    if isinstance(value, dict):
        return {
            k: (
                REDACTED
                if _is_sensitive(str(k), keep_personal=keep_personal)
                else redact(v, **deeper)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, **deeper) for v in value]
    if isinstance(value, str):
        return redact_text(value, keep_personal=keep_personal)
    return value
