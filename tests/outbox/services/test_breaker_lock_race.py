"""Two workers count failures of one destination at the breaker's threshold at once: one pauses it, the other
waited for the breaker's row lock meanwhile. In READ COMMITTED the waiting statement re-reads the locked row
but a subquery of it keeps the snapshot from before the wait, so a breaker that read its holds in the locking
statement saw no pause and paused again: a second live hold, a second "paused" event, its probes reset."""

import pytest
from django.conf import settings
from django.db import connections

from lib.databases import DB
from outbox.failures import DeliveryResult
from outbox.models import DestinationEvent, DestinationHold, FailureClass
from outbox.services.breaker import destination_health_get_or_create, destination_record_results
from tests.locks import held_by_another_session

NAME = "receiver"


def _threshold_of_failures() -> None:
    failed = DeliveryResult.failed(FailureClass.TRANSIENT, "connect_failed", "connection refused")
    destination_record_results(name=NAME, results=[failed] * settings.HANDOFF_BREAKER_THRESHOLD)


@pytest.mark.postgres
@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_worker_that_waited_for_the_breakers_lock_sees_the_pause_made_meanwhile():
    assert connections[DB].vendor == "postgresql", "a lock race: run with DATABASE_URL"
    destination_health_get_or_create(NAME)
    with held_by_another_session(DB, _threshold_of_failures) as seen:
        _threshold_of_failures()
    assert seen.get("waiting"), "this worker did not wait for the other's lock: no race was run"
    assert DestinationHold.objects.of_breaker().filter(destination=NAME).count() == 1
    assert DestinationEvent.objects.filter(destination=NAME, to_state="paused").count() == 1
