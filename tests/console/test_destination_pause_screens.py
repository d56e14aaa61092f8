"""A paused destination is visible where on-call people look: the health page and every waiting handoff."""

import pytest
from django.test import Client

from outbox.failures import DeliveryResult
from outbox.models import FailureClass
from outbox.services.breaker import destination_record_results
from tests.builders import approve

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def refuse_credentials() -> None:
    destination_record_results(
        name="receiver",
        results=[
            DeliveryResult.failed(
                FailureClass.CREDENTIAL, "credential_rejected", "HTTP 401", status_code=401
            )
        ],
    )


def test_a_paused_destination_shows_on_the_health_page_and_on_a_waiting_handoff(world):
    handoff = approve(world)
    client = Client()
    client.force_login(world["olga"])
    assert "is paused" not in client.get("/health/").content.decode()
    refuse_credentials()
    health = client.get("/health/").content.decode()
    assert "Destination receiver is paused since" in health and "credentials refused" in health
    detail = client.get(f"/handoffs/{handoff.pk}/").content.decode()
    assert "Waiting: destination receiver is held." in detail
    assert "Rotate or restore the signing secret" in detail


def test_the_handoff_page_names_its_destination_and_the_last_successful_step(world):
    from outbox.dispatch.dispatcher import drain

    handoff = approve(world)
    client = Client()
    client.force_login(world["olga"])
    before = client.get(f"/handoffs/{handoff.pk}/").content.decode()
    assert "receiver (in process)" in before
    assert (
        "approved and recorded in the outbox" in before
        and "none answered by the receiver" in before
    )
    drain()
    handoff.refresh_from_db()
    after = client.get(f"/handoffs/{handoff.pk}/").content.decode()
    assert "receipt validated at" in after and f"task {handoff.destination_id}" in after
