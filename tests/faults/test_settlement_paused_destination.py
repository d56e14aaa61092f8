"""A destination paused by its breaker, whose receiver is down, keeps its uncertain backlog and holds up nobody
else's settlement: a real `manage.py dispatch` process serving both destinations settles the healthy one's
uncertain outcomes by lookup and delivers its due rows, while the paused one stays paused and its outcomes stay
uncertain (its probes, lookups at a server that never answers, fail and settle nothing). PostgreSQL."""

import socket

import pytest

from delivery import services as receiver_services
from delivery.models import ReceiverTask
from outbox.models import (
    DestinationHealth,
    Handoff,
    HandoffEvent,
    HandoffState,
)
from outbox.services.destination_configs import destination_configs_apply
from tests.factories import HandoffFactory, pause_by_breaker, paused_by_breaker
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
PAUSED, HEALTHY = "paused-crm", "receiver"  # the healthy one is the seed: the bundled receiver
# More than one settlement batch (50) of each, so that the healthy one's backlog takes several passes.
PAUSED_BACKLOG, HEALTHY_BACKLOG, HEALTHY_DUE = 60, 80, 30
DEADLINE_SECONDS = 180


@pytest.fixture
def silent_server():
    """A port that takes connections (the kernel's backlog) and never answers: a receiver that hangs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/delivery/api"


def paused_with_a_backlog(url: str) -> list[Handoff]:
    """The paused destination: a row of the http kind at `url`, paused by its breaker (probe due), and its
    uncertain outcomes."""
    destination_configs_apply(
        document={
            "destinations": [{"name": PAUSED, "kind": "http", "url": url, "read_timeout": 1.0}]
        },
        actor_label="fault test",
    )
    pause_by_breaker(PAUSED, next_probe_in=0)
    return [
        HandoffFactory(number=n, state=S.UNCERTAIN, destination=PAUSED)
        for n in range(1, PAUSED_BACKLOG + 1)
    ]


def healthy_work() -> tuple[list[Handoff], list[Handoff]]:
    """The healthy destination's uncertain outcomes (created at the receiver, the answer lost) and due rows."""
    lost = [
        HandoffFactory(number=1000 + n, state=S.UNCERTAIN, destination=HEALTHY)
        for n in range(HEALTHY_BACKLOG)
    ]
    for handoff in lost:
        receiver_services.task_create_idempotent(
            action_key=handoff.action_key, payload=handoff.payload
        )
    return lost, [HandoffFactory(number=2000 + n, destination=HEALTHY) for n in range(HEALTHY_DUE)]


def test_a_paused_destination_with_an_uncertain_backlog_holds_up_no_other_destination(
    processes, silent_server
):
    stuck = paused_with_a_backlog(silent_server)
    lost, due = healthy_work()
    processes.start_receiver()
    dispatcher = processes.start_dispatcher("both")

    healthy = Handoff.objects.filter(destination=HEALTHY)
    wait_until(
        lambda: healthy.filter(state=S.DELIVERED).count() == HEALTHY_BACKLOG + HEALTHY_DUE,
        timeout=DEADLINE_SECONDS,
        what="the healthy destination's uncertain and due handoffs to be delivered",
        procs=[dispatcher],
    )
    assert dispatcher.poll() is None
    # The paused destination was probed (its maintenance ran) and is still paused; nothing of it moved.
    health = DestinationHealth.objects.get(name=PAUSED)
    assert (paused_by_breaker(PAUSED), health.probes > 0) == (True, True)
    processes.stop_all()
    states = Handoff.objects.filter(destination=PAUSED).values_list("state", flat=True)
    assert set(states) == {S.UNCERTAIN}
    assert not HandoffEvent.objects.filter(handoff__in=stuck).exists()
    # The healthy one's uncertain outcomes were settled by asking (no second task), its due rows sent once.
    settled = HandoffEvent.objects.filter(
        handoff__in=lost, from_state=S.UNCERTAIN, to_state=S.DELIVERED
    )
    assert settled.count() == HEALTHY_BACKLOG
    keys = [h.action_key for h in [*lost, *due]]
    assert ReceiverTask.objects.filter(action_key__in=keys).count() == len(keys)
