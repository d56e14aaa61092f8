"""The Health page's Retry-After line says since when a destination has been held, how long ago that was and
until when, as the handoff list and the handoff's page do ("held since …, until …"): it said only "held
until 16:25:31 UTC", so an operator could not tell a hold of a minute from one renewed for an hour."""

import re

import pytest

from outbox.clock import db_now_plus
from outbox.failures import DeliveryResult
from outbox.models import DestinationHealth, FailureClass
from outbox.services.limits import destination_acquire, destination_release
from tests.console.clients import client_for
from tests.factories import retry_after_rows

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _utc(at) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC"


def _receiver_answers_retry_after(seconds: float) -> DestinationHealth:
    permit = destination_acquire(name="receiver", worker="test", requests=1, lease_seconds=30)
    permit.made(
        [
            DeliveryResult.failed(
                FailureClass.TRANSIENT,
                "http_429",
                "too many requests",
                status_code=429,
                retry_after=seconds,
            )
        ]
    )
    destination_release(permit=permit)
    return DestinationHealth.objects.get(name="receiver")


def _hold_cell(html: str) -> str:
    match = re.search(r'<td id="destination-receiver-hold">(.*?)</td>', html, re.S)
    assert match, "the Health page has the receiver's Retry-After line"
    return " ".join(match.group(1).split())


def test_the_hold_line_says_since_when_how_long_ago_and_until_when(world):
    _receiver_answers_retry_after(600)
    # The hold in force began an hour ago (answers since then extended it, keeping its start).
    retry_after_rows("receiver").update(starts_at=db_now_plus(-3600))
    health = DestinationHealth.objects.with_retry_after().get(name="receiver")

    response = client_for(world["olga"]).get("/health/")

    assert response.status_code == 200
    line = _hold_cell(response.content.decode())
    assert line.startswith(
        f"held since {_utc(health.hold_since)} (1 hour ago), until {_utc(health.hold_until)}"
    ), line
    assert "no calls until then" in line


def test_a_destination_without_a_hold_says_none(world):
    response = client_for(world["olga"]).get("/health/")

    assert response.status_code == 200
    assert _hold_cell(response.content.decode()) == "none"
