"""The one parser of the dates and times people and peers type: forms, query strings, API bodies, commands.

A value is a day (`2026-12-01`, midnight) or an ISO 8601 time (`2026-12-01T22:00`, `2026-12-01 22:00+01:00`);
a time without an offset is UTC, the zone every timestamp of record is stored in. A month 13, an offset of
25 hours or a year 9999 is refused here with the field's name (`BadMoment`), so that no caller fails later
with a 500: Python refuses the first two only when it builds the value, and the last overflows as soon as a
day is added to it or it is moved to UTC. The range is wide enough for any record the product keeps.
"""

from datetime import UTC, datetime, timedelta

from django.utils.dateparse import parse_date, parse_datetime

YEARS = (1970, 2999)
# The offsets in use on Earth (UTC-12:00 to UTC+14:00).
OFFSETS = (timedelta(hours=-12), timedelta(hours=14))
# Longer than any ISO 8601 time with microseconds and an offset: nothing longer is parsed.
MAX_LENGTH = 40
FORMS = "a day (2026-12-01) or an ISO 8601 time (2026-12-01T22:00, 2026-12-01T22:00+01:00)"
WITH_OFFSET = "an ISO 8601 time with its offset from UTC (2026-12-01T22:00+01:00)"


class BadMoment(ValueError):
    """A date or time that cannot be used; the message names the field and says why."""


def _parsed(text: str, *, field: str) -> datetime | None:
    try:
        moment = parse_datetime(text)
        day = parse_date(text) if moment is None else None
    except ValueError as exc:  # well-formed but not a real time: month 13, offset +25:00
        raise BadMoment(
            f"{field} is out of range, not {text!r} (months 1 to 12, the days of the month, offsets "
            "from -12:00 to +14:00)"
        ) from exc
    if day is not None:
        return datetime.combine(day, datetime.min.time())
    return moment


def parse_moment(raw: str, *, field: str, offset_required: bool = False) -> datetime:
    """`raw` as an aware time in the years 1970 to 2999 (a day is its midnight; no offset: UTC, unless
    `offset_required`, for peers that must say theirs)."""
    text = (raw or "").strip()
    moment = _parsed(text, field=field) if len(text) <= MAX_LENGTH else None
    if moment is None or (offset_required and moment.tzinfo is None):
        forms = WITH_OFFSET if offset_required else FORMS
        raise BadMoment(f"{field} must be {forms}, not {text[:MAX_LENGTH]!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if not OFFSETS[0] <= moment.utcoffset() <= OFFSETS[1]:
        raise BadMoment(f"{field} must have an offset from UTC between -12:00 and +14:00")
    # The year as written, before any conversion: 9999-12-31T23:00-05:00 in UTC is past Python's last year.
    if not YEARS[0] <= moment.year <= YEARS[1]:
        raise BadMoment(f"{field} must be in the years {YEARS[0]} to {YEARS[1]}")
    return moment
