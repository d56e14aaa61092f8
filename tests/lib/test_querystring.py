"""lib/querystring.py: only values a console link could have produced are accepted."""

from datetime import UTC, datetime

import pytest

from lib.querystring import MAX_ID, BadQueryValue, parse_id, parse_keyset_cursor


def test_an_empty_id_is_none_and_a_whole_number_in_range_is_that_number():
    assert parse_id("", name="workspace") is None
    assert parse_id("7", name="workspace") == 7
    assert parse_id(str(MAX_ID), name="workspace") == MAX_ID


@pytest.mark.parametrize("raw", ["0", "-1", "1.5", "abc", " 7", "٣", str(MAX_ID + 1), "1e3"])
def test_an_id_that_no_link_produces_is_refused_with_its_name(raw):
    with pytest.raises(BadQueryValue, match="^workspace must be a whole number"):
        parse_id(raw, name="workspace")


def test_an_empty_cursor_is_none_and_a_cursor_is_its_timestamp_and_id():
    assert parse_keyset_cursor("", name="after") is None
    assert parse_keyset_cursor("2026-01-02T03:04:05+00:00_17", name="after") == (
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        17,
    )


@pytest.mark.parametrize("raw", ["17", "yesterday_17", "2026-13-45T00:00:00_17"])
def test_a_cursor_without_a_real_timestamp_is_refused(raw):
    with pytest.raises(BadQueryValue, match="^after is not a cursor of this list"):
        parse_keyset_cursor(raw, name="after")


@pytest.mark.parametrize(
    "raw",
    [
        "2026-01-02T03:04:05+00:00_0",
        "2026-01-02T03:04:05+00:00_x",
        f"2026-01-02T03:04:05+00:00_{MAX_ID + 1}",
    ],
)
def test_a_cursor_with_an_impossible_id_is_refused(raw):
    with pytest.raises(BadQueryValue, match="^after must be a whole number"):
        parse_keyset_cursor(raw, name="after")
