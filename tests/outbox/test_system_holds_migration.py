"""Migration 0027 copies the holds a destination row held in its columns into rows (issue 36: every hold is
a row): a live Retry-After becomes a Retry-After hold with its start and end, a breaker's pause for refused
credentials a credential hold until a probe succeeds, and an unservable pause an unservable hold; the
dispatcher's held check reads them."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.services.limits import destination_held
from tests.migrations import latest, migrate

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("outbox", "0026_case_holds")]
AFTER = [("outbox", "0027_system_holds_are_rows")]


def test_the_columns_breaker_pause_and_retry_after_become_hold_rows():
    old = migrate(BEFORE)
    health = old.get_model("outbox", "DestinationHealth")
    now = timezone.now()
    health.objects.create(
        name="crm",
        hold_since=now - timedelta(seconds=5),
        hold_until=now + timedelta(minutes=5),
        hold_reason="HTTP 429 with Retry-After 300 s",
    )
    health.objects.create(
        name="accounts",
        state="paused",
        pause_reason="credential",
        paused_at=now - timedelta(minutes=1),
        last_error="credential_rejected: HTTP 401",
    )
    health.objects.create(
        name="mail", state="paused", pause_reason="unservable", last_error="secret missing"
    )
    health.objects.create(name="erp")
    try:
        # The rows read through 0027's model: a later migration's column is not there yet.
        holds = migrate(AFTER).get_model("outbox", "DestinationHold")
        rows = {
            h.destination: (h.kind, h.reason, h.until_probe, h.ends_at is None, h.set_by)
            for h in holds.objects.all()
        }
        assert rows == {
            "crm": (
                "retry_after",
                "HTTP 429 with Retry-After 300 s",
                False,
                False,
                "the destination (its answer)",
            ),
            "accounts": ("credential", "credential_rejected: HTTP 401", True, True, "the breaker"),
            "mail": ("unservable", "secret missing", False, True, "a dispatcher"),
        }
    finally:
        migrate(latest())
    # A Retry-After and an unservable hold give no permit; a credential hold leaves the probe to the breaker.
    assert destination_held(name="crm")
    assert destination_held(name="mail")
    assert not destination_held(name="accounts")
    assert not destination_held(name="erp")
