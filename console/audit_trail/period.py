"""The period of an export as people type it: a day (`2026-12-01`, midnight UTC) or an ISO 8601 time.

A time without a zone is read as UTC, the zone every timestamp of record is stored in."""

from datetime import UTC, datetime, timedelta

from django.utils.dateparse import parse_date, parse_datetime

from approvals.errors import InvalidPayload


def parse_moment(text: str, *, field: str) -> datetime:
    text = (text or "").strip()
    try:
        moment = parse_datetime(text)
        day = None if moment else parse_date(text)
    except ValueError:
        moment = day = None
    if day is not None:
        moment = datetime(day.year, day.month, day.day)
    if moment is None:
        raise InvalidPayload(
            [f"{field}: a day (2026-12-01) or an ISO 8601 time, not {text[:40]!r}"]
        )
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_period(since: str, until: str) -> tuple[datetime, datetime]:
    """[since, until); an empty `until` is the day after `since`."""
    start = parse_moment(since, field="from")
    end = parse_moment(until, field="until") if until else start + timedelta(days=1)
    return start, end
