"""What a search box's text names, for every search of requests and handoffs (the console's lists, My
requests, the admin): a request number ("42", "request 42", "#42"), a whole key (`onboarding:7:42:1`), a
payload hash, or else text to look for. One reading for all of them, so that the same words find the same
thing everywhere (docs/console.md, "Search by what people know")."""

import re
from typing import NamedTuple

# Longer than any key or value a search text holds (`outbox/search_text.py` keeps 200 characters of each).
MAX_SEARCH_LENGTH = 200
# A number of more digits is no request, workspace or revision (int() also refuses over 4,300 digits).
MAX_NUMBER_DIGITS = 18

# "42", "#42", "request 42" or "request #42": ASCII digits only, never inside other ids.
_REQUEST_NUMBER = re.compile(r"(?:request\s+#?|#)?([0-9]{1,18})", re.IGNORECASE)
# An action key or an instance key, `<workflow>:<workspace>:<number>:<revision>[:<step>[:compensate]]`.
_ACTION_KEY = re.compile(r"[a-z][a-z0-9_-]*:[0-9]+:[0-9]+:[0-9]+(?::[A-Za-z0-9_-]+)*")
# A payload's SHA-256, as decisions, handoffs and receipts show it.
_PAYLOAD_HASH = re.compile(r"[0-9a-fA-F]{64}")


class BadSearch(ValueError):
    """A search that cannot be read; the message says why (the screens answer 400 with it)."""


class TypedKey(NamedTuple):
    """The request revision a whole key names (whatever step follows)."""

    workflow: str
    workspace_id: int
    number: int
    revision: int


def search_typed(raw: str) -> str:
    """The search as typed, without surrounding spaces; refused when it is longer than any search text."""
    text = raw.strip()
    if len(text) > MAX_SEARCH_LENGTH:
        raise BadSearch(
            f"a search is at most {MAX_SEARCH_LENGTH} characters (this one has {len(text)})"
        )
    return text


def request_number(text: str) -> int | None:
    """The request number a search names ("42", "#42", "request 42"), else None."""
    match = _REQUEST_NUMBER.fullmatch(text.strip())
    return int(match.group(1)) if match else None


def is_whole_key(text: str) -> bool:
    """The search is a whole action or instance key (`onboarding:7:42:1`, `onboarding:7:42:1:create`)."""
    return _ACTION_KEY.fullmatch(text) is not None


def typed_key(text: str) -> TypedKey | None:
    """The revision a whole key names, else None; a key whose numbers no request can have is refused."""
    if not is_whole_key(text):
        return None
    workflow, *numbers = text.split(":")[:4]
    if any(len(part) > MAX_NUMBER_DIGITS for part in numbers):
        raise BadSearch(
            f"a key's workspace, number and revision have at most {MAX_NUMBER_DIGITS} digits"
        )
    workspace_id, number, revision = (int(part) for part in numbers)
    return TypedKey(workflow, workspace_id, number, revision)


def is_payload_hash(text: str) -> bool:
    """The search is a whole payload hash (64 hex digits; stored in lower case)."""
    return _PAYLOAD_HASH.fullmatch(text) is not None
