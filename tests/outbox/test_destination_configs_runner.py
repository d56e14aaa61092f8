"""The dispatcher process serves every enabled destination with a pool of workers, one at a time per
destination: a destination whose calls never come back holds up nobody else's handoffs, and many
destinations need no more workers than configured."""

import threading

import pytest

from outbox.models import DestinationConfig, Handoff, HandoffState
from tests.builders import record
from tests.outbox.script_receivers import dispatcher_running, script_receiver, wait_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
# A receiver that takes every connection and never answers, in a process of its own, on the socket it inherits.
SILENT = """
import socket, sys
server = socket.socket(fileno=int(sys.argv[1]))
server.listen()
print("listening", flush=True)
held = []
while True:
    held.append(server.accept())
"""


@pytest.fixture
def silent_receiver():
    with script_receiver(SILENT) as receiver:
        yield receiver


# Worker threads and the test's own reads at once: SQLite's in-memory test database (shared cache) refuses a
# read while another connection writes ("table is locked"), where a file database would wait.
@pytest.mark.postgres
def test_a_destination_that_never_answers_does_not_hold_up_the_others(silent_receiver):
    url, silent = silent_receiver
    DestinationConfig.objects.create(
        name="dead",
        kind="http",
        # Its one call waits 25 s for an answer that never comes (less than a lease).
        config={"url": url, "connect_timeout": 1.0, "read_timeout": 25.0},
    )
    stuck = record(1)
    Handoff.objects.filter(pk=stuck.pk).update(destination="dead")
    # The silent receiver's end makes the hanging call return, so the loops can end.
    with dispatcher_running(on_stop=silent.kill) as dispatcher:
        wait_for(
            lambda: Handoff.objects.filter(pk=stuck.pk, state=S.IN_FLIGHT).exists(),
            "the dead destination's call is under way",
        )
        # Recorded while the dead destination's call hangs: the default destination delivers it anyway.
        healthy = record(2)
        wait_for(
            lambda: Handoff.objects.filter(pk=healthy.pk, state=S.DELIVERED).exists(),
            "the healthy destination's handoff is delivered",
        )
        assert Handoff.objects.get(pk=stuck.pk).state == S.IN_FLIGHT
    assert not dispatcher.is_alive()


@pytest.mark.postgres  # as above
def test_twelve_destinations_are_served_by_the_configured_three_workers_and_all_deliver(settings):
    settings.HANDOFF_DISPATCH_WORKERS = 3
    names = [f"system-{n}" for n in range(12)]
    for name in names:
        DestinationConfig.objects.create(name=name, kind="in_process", config={})
    handoffs = [record(n) for n in range(1, 25)]
    for n, handoff in enumerate(handoffs):
        Handoff.objects.filter(pk=handoff.pk).update(destination=names[n % len(names)])
    with dispatcher_running() as dispatcher:
        wait_for(
            lambda: not Handoff.objects.exclude(state=S.DELIVERED).exists(),
            "every destination's handoffs delivered",
        )
        workers = [t for t in threading.enumerate() if t.name.startswith("deliver:")]
        assert len(workers) == 3, [t.name for t in workers]
    assert not dispatcher.is_alive()
    delivered_to = set(Handoff.objects.values_list("destination", flat=True))
    assert delivered_to == set(names)
