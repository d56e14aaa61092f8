"""A `Retry-After` given as an HTTP date is the receiver's clock: measured from the answer's own `Date` header,
the wait is what the receiver asked for, however far this host's clock is from the receiver's."""

from outbox.failures import parse_retry_after

DATE = "Wed, 02 Dec 2026 06:00:00 GMT"


def test_an_http_date_is_measured_from_the_answers_date_header():
    assert parse_retry_after("Wed, 02 Dec 2026 06:00:45 GMT", date=DATE) == 45.0
    assert parse_retry_after("Wed, 02 Dec 2026 05:59:00 GMT", date=DATE) == 0.0
    assert parse_retry_after("120", date=DATE) == 120.0


def test_without_a_usable_date_header_this_hosts_clock_is_used():
    # A date long past is no wait, by any clock.
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", date="not a date") == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
