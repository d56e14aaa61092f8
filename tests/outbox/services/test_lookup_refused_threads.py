"""A replay preview asks a few lookups at once through one `LimitedLookups` (its threads share it): why a lookup
was refused (`refused`) is each thread's own, on PostgreSQL where the threads have connections of their own. A
thread refused by the destination's limit reads its refusal even after another thread's lookup was given a
permit and answered."""

import threading

import pytest
from django.db import connections

from outbox.destinations import get_destination
from outbox.models import DestinationHealth
from outbox.services.breaker import destination_health_get_or_create
from outbox.services.limits import destination_acquire, destination_release
from outbox.services.lookup_limits import DestinationBusy, lookups_under_limits

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def in_thread(call) -> threading.Thread:
    def run():
        try:
            call()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_each_thread_sharing_the_lookups_reads_its_own_refusal():
    destination = get_destination()
    destination_health_get_or_create(destination.name)
    DestinationHealth.objects.filter(name=destination.name).update(
        max_concurrency=1, max_requests_per_second=None
    )
    lookups = lookups_under_limits(destination, worker="replay preview", wait_seconds=0.3)
    other = destination_acquire(
        name=destination.name, worker="another preview", requests=1, lease_seconds=60
    )
    refused, answered = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def first():
        try:
            lookups.lookup("a:1")
        except DestinationBusy as exc:
            seen["first_error"] = str(exc)
        refused.set()
        assert answered.wait(30)
        seen["first"] = lookups.refused

    def second():
        assert refused.wait(30)
        seen["answer"] = lookups.lookup("a:2")
        seen["second"] = lookups.refused
        answered.set()

    threads = [in_thread(first)]
    assert refused.wait(30)
    destination_release(permit=other)
    threads.append(in_thread(second))
    for thread in threads:
        thread.join(30)

    in_flight = f"destination {destination.name} has 1 call(s) in flight"
    assert seen["first_error"] == f"not asked: {in_flight}"
    assert seen["answer"] is None and seen["second"] == ""
    assert seen["first"] == in_flight, "the first thread's refusal, not the second's permit"
