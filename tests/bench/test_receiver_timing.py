"""The bench's receiver notes each create call's arrival and its transaction's commit (bench/receiver_timing.py),
the times the product's share of the latency is taken from: a real gunicorn on the test databases, signed calls
over HTTP, the notes checked against the caller's clock and the receiver's own task rows."""

import json
import time

import pytest
from django.db import connections

from delivery.models import ReceiverTask
from outbox.signing import signed_headers
from tests.delivery.receiver_process import Receiver
from tests.processes import LOCAL_HTTP

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]

PAYLOAD = {"client_name": "Northwind Traders", "plan": "standard"}


@pytest.fixture
def receiver(transactional_db, tmp_path):
    if connections["default"].vendor != "postgresql":
        pytest.fail(
            "the receiver's timing test runs gunicorn on the test databases: run it with DATABASE_URL and "
            "DELIVERY_DATABASE_URL set to PostgreSQL"
        )
    timing = tmp_path / "timing.jsonl"
    process = Receiver(
        tmp_path,
        workers=1,
        env={"BENCH_RECEIVER_TIMING": str(timing)},
        app="bench.receiver_timing:application",
        worker_class="bench.receiver_timing_worker.TimedThreadWorker",
    )
    try:
        process.wait_until_up()
        yield process, timing
    finally:
        process.stop()
        for alias in ("default", "delivery"):
            connections[alias].close()


def post(url: str, body: dict) -> tuple[float, float]:
    """The signed call, and this host's clock just before it was sent and just after its answer came."""
    text = json.dumps(body)
    headers = {**signed_headers(text), "Content-Type": "application/json"}
    before = time.time()
    response = LOCAL_HTTP.post(url, content=text, headers=headers, timeout=30)
    after = time.time()
    assert response.status_code in (200, 201), response.text
    return before, after


def test_each_create_call_is_noted_with_its_keys_arrival_and_commit_while_the_file_exists(receiver):
    process, timing = receiver
    timing.write_text("")
    batch = {"items": [{"action_key": f"onboarding:7:{n}:1", "payload": PAYLOAD} for n in (1, 2)]}
    calls = [
        post(f"{process.url}/tasks/batch", batch),
        post(f"{process.url}/tasks", {"action_key": "onboarding:7:3:1", "payload": PAYLOAD}),
    ]
    notes = [json.loads(line) for line in timing.read_text().splitlines()]
    assert [note["keys"] for note in notes] == [
        ["onboarding:7:1:1", "onboarding:7:2:1"],
        ["onboarding:7:3:1"],
    ]
    created = dict(ReceiverTask.objects.values_list("action_key", "created_at"))
    for (before, after), note in zip(calls, notes, strict=True):
        # Arrived when gunicorn's poller handed the request to a thread, before its handler started.
        assert before <= note["arrived"] < note["handled"] <= note["committed"]
        assert note["committed"] <= note["answered"] <= after
        for key in note["keys"]:
            # The task's insert lies between the call's arrival and its commit.
            assert note["arrived"] <= created[key].timestamp() <= note["committed"]
    # Once the latency run has removed its file, the receiver notes nothing (and creates as before).
    timing.unlink()
    post(f"{process.url}/tasks", {"action_key": "onboarding:7:4:1", "payload": PAYLOAD})
    assert not timing.exists()
    assert ReceiverTask.objects.filter(action_key="onboarding:7:4:1").exists()
