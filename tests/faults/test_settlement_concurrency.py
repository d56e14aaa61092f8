"""Two dispatcher processes settling one backlog of uncertain outcomes never ask the receiver about the same key:
each settlement turn claims its own batch (`FOR NO KEY UPDATE SKIP LOCKED`, a lease), and the receiver, a real
gunicorn whose access log names every lookup, sees each key asked exactly once. PostgreSQL."""

import time
from collections import Counter
from urllib.parse import unquote

import pytest

from delivery import services as receiver_services
from outbox.models import Handoff, HandoffEvent, HandoffState
from tests.delivery.receiver_process import Receiver
from tests.factories import HandoffFactory

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
# More than one settlement turn's batch (50), so that both dispatchers have work at once.
BACKLOG = 120
DEADLINE_SECONDS = 120
LOOKUP_PATH = "/delivery/api/tasks/"


@pytest.fixture
def receiver(processes, tmp_path):
    process = Receiver(tmp_path, workers=2, env={}, access_format="%(m)s %(U)s %(s)s")
    try:
        process.wait_until_up()
        processes.receiver_url = process.url
        yield process
    finally:
        process.stop()


def lookups_seen(receiver: Receiver) -> Counter:
    """How often the receiver was asked about each key (GET /tasks/<key>), by its access log."""
    asked = Counter()
    for line in receiver.access_log.read_text().splitlines():
        method, path, _status = line.split()
        if method == "GET" and path.startswith(LOOKUP_PATH):
            asked[unquote(path.removeprefix(LOOKUP_PATH))] += 1
    return asked


def test_two_dispatchers_settling_one_backlog_never_ask_about_the_same_key(processes, receiver):
    handoffs = [HandoffFactory(number=n, state=S.UNCERTAIN) for n in range(1, BACKLOG + 1)]
    for handoff in handoffs:  # delivered at the receiver, the answer lost: uncertain at the source
        receiver_services.task_create_idempotent(
            action_key=handoff.action_key, payload=handoff.payload
        )
    for name in ("settler-a", "settler-b"):
        processes.start_dispatcher(name)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while Handoff.objects.filter(state=S.UNCERTAIN).exists():
        if time.monotonic() > deadline:
            pytest.fail(
                f"{Handoff.objects.filter(state=S.UNCERTAIN).count()} still uncertain after "
                f"{DEADLINE_SECONDS}s"
            )
        time.sleep(0.2)
    processes.stop_all()
    assert Handoff.objects.filter(state=S.DELIVERED).count() == BACKLOG
    asked = lookups_seen(receiver)
    assert set(asked) == {h.action_key for h in handoffs}
    assert [key for key, times in asked.items() if times > 1] == []
    # One settlement event each, written by the settler that asked.
    assert (
        HandoffEvent.objects.filter(from_state=S.UNCERTAIN, to_state=S.DELIVERED).count() == BACKLOG
    )
