"""A dispatcher host whose clock is off signs its calls with the database's time (issue 38: a clock jump of
five minutes on one dispatcher host refuses nothing). Receivers check a Standard Webhooks timestamp against
their own clock with a 5-minute tolerance, so a host 300 s behind had its calls refused as too old once a
call crossed a second boundary: `tests/hosts/test_partitions.py`'s clock jump failed under load."""

from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from outbox import clock
from outbox.clock import db_clock_offset_read, db_time
from outbox.signing import signed_headers

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.mark.parametrize("host_off_seconds", [-300, 300])
def test_a_host_five_minutes_off_signs_with_the_databases_time_and_the_receiver_accepts(
    monkeypatch, host_off_seconds
):
    monkeypatch.setattr(clock, "_offset_seconds", clock._offset_seconds)  # restored after the test
    true_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: true_now() + timedelta(seconds=host_off_seconds))
    db_clock_offset_read()  # what the dispatcher does once per claim batch
    headers = signed_headers("{}", secret=SECRET, message_id="msg_1")
    assert abs(int(headers["webhook-timestamp"]) - db_time().timestamp()) < 5
    monkeypatch.setattr(timezone, "now", true_now)  # the receiver's clock is right
    assert Webhook(SECRET).verify("{}", headers) == {}


def test_before_any_read_a_host_signs_with_its_own_clock(monkeypatch):
    monkeypatch.setattr(clock, "_offset_seconds", 0.0)
    headers = signed_headers("{}", secret=SECRET, message_id="msg_2")
    assert abs(int(headers["webhook-timestamp"]) - timezone.now().timestamp()) < 5
