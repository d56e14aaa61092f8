"""Parsing of console query-string values (ids, keyset cursors) that come from links but can be edited.

A value that cannot be what a link of ours produced is refused with `BadQueryValue` and its reason, so the
view answers 400 instead of passing an impossible date or an id past the database's integer range on to
a query (which would fail as a 500).
"""

from datetime import datetime

from lib.moments import BadMoment, parse_moment

# Primary keys are 64-bit signed integers on every backend we run.
MAX_ID = 2**63 - 1


class BadQueryValue(ValueError):
    """A query-string value that no link of the console produces; the message says which and why."""


def whole_number(raw: str, *, high: int) -> int | None:
    """`raw` as a whole number from 1 to `high`, or None for anything else. ASCII digits only, and the length
    checked before int(): int() refuses other digits ("²") and numbers of more than 4,300 digits."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(high)):
        return None
    value = int(raw)
    return value if 0 < value <= high else None


def id_or_none(raw: str) -> int | None:
    """A posted or linked id in the database's range, or None for anything that cannot be one: for the callers
    that answer "no such thing" themselves."""
    return whole_number(raw, high=MAX_ID)


def parse_id(raw: str, *, name: str) -> int | None:
    """An id in the database's range, or None when the value is empty."""
    if raw == "":
        return None
    value = id_or_none(raw)
    if value is None:
        raise BadQueryValue(f"{name} must be a whole number between 1 and {MAX_ID}")
    return value


def parse_keyset_cursor(raw: str, *, name: str) -> tuple[datetime, int] | None:
    """A `<ISO timestamp>_<id>` cursor, or None when the value is empty."""
    if raw == "":
        return None
    stamp, _, pk = raw.rpartition("_")
    try:
        created = parse_moment(stamp, field=name)
    except BadMoment as exc:
        raise BadQueryValue(
            f"{name} is not a cursor of this list (expected <timestamp>_<id>)"
        ) from exc
    return created, parse_id(pk, name=name)


def keyset_cursor(row, *, field: str = "created_at") -> str:
    """The cursor of the row a list page ends at, in the one format every console list reads back."""
    return f"{getattr(row, field).isoformat()}_{row.pk}"
