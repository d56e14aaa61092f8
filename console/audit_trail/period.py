"""The period of an export as people type it: a day (`2026-12-01`, midnight UTC) or an ISO 8601 time, read
by the product's one parser of dates (`lib.moments`: a time without a zone is UTC, a value out of range is
refused with the field's name)."""

from datetime import datetime, timedelta

from lib.moments import parse_moment


def parse_period(since: str, until: str) -> tuple[datetime, datetime]:
    """[since, until); an empty `until` is the day after `since`. Raises `lib.moments.BadMoment`."""
    start = parse_moment(since, field="from")
    end = parse_moment(until, field="until") if until else start + timedelta(days=1)
    return start, end
