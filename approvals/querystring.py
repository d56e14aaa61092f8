"""Parsing of console query-string values (ids, keyset cursors) that come from links but can be edited.

A value that cannot be what a link of ours produced is refused with `BadQueryValue` and its reason, so the
view answers 400 instead of passing an impossible date or an id past the database's integer range on to
a query (which would fail as a 500).
"""

from datetime import datetime

from django.utils.dateparse import parse_datetime

# Primary keys are 64-bit signed integers on every backend we run.
MAX_ID = 2**63 - 1


class BadQueryValue(ValueError):
    """A query-string value that no link of the console produces; the message says which and why."""


def parse_id(raw: str, *, name: str) -> int | None:
    """An id in the database's range, or None when the value is empty."""
    if raw == "":
        return None
    # ASCII digits only, and no more than MAX_ID has: int() refuses other digits ("²") and numbers of more
    # than 4,300 digits, and a larger id would fail in the query.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(MAX_ID)) or not 0 < int(raw) <= MAX_ID:
        raise BadQueryValue(f"{name} must be a whole number between 1 and {MAX_ID}")
    return int(raw)


def id_or_none(raw: str) -> int | None:
    """A posted or linked id, or None for anything that cannot be one (empty, not ASCII digits, out of range):
    for the callers that answer "no such thing" themselves."""
    try:
        return parse_id(raw, name="id")
    except BadQueryValue:
        return None


def parse_keyset_cursor(raw: str, *, name: str) -> tuple[datetime, int] | None:
    """A `<ISO timestamp>_<id>` cursor, or None when the value is empty."""
    if raw == "":
        return None
    stamp, _, pk = raw.rpartition("_")
    try:
        created = parse_datetime(stamp)
    except ValueError:
        created = None
    if created is None:
        raise BadQueryValue(f"{name} is not a cursor of this list (expected <timestamp>_<id>)")
    return created, parse_id(pk, name=name)


def keyset_cursor(row, *, field: str = "created_at") -> str:
    """The cursor of the row a list page ends at, in the one format every console list reads back."""
    return f"{getattr(row, field).isoformat()}_{row.pk}"
