"""A demo fault fires once per action key across every worker process of the receiver, not once per
process: the README promises that the handoff then recovers, which a retry landing on another
gunicorn worker must not contradict."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connections

from delivery.models import FiredFault, ReceiverTask
from outbox.signing import signed_headers
from tests.delivery.receiver_process import Receiver

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]

KEY = "onboarding:7:42:1"
BODY = json.dumps(
    {"action_key": KEY, "payload": {"client_name": "Northwind Traders", "plan": "standard"}}
)
ROUND = 4
DEADLINE_SECONDS = 60


@pytest.fixture
def receiver(transactional_db, tmp_path):
    if connections["default"].vendor != "postgresql":
        pytest.fail(
            "the fault-state test needs PostgreSQL (several receiver processes share the database): "
            "run it with DATABASE_URL and DELIVERY_DATABASE_URL set"
        )
    process = Receiver(
        tmp_path, workers=2, env={"RECEIVER_FAULTS": json.dumps({"keys": {KEY: "http_503"}})}
    )
    try:
        process.wait_until_up()
        yield process
    finally:
        process.stop()
        for alias in ("default", "delivery"):
            connections[alias].close()


def post_on_a_fresh_connection(url: str) -> int:
    headers = {
        **signed_headers(BODY),
        "Content-Type": "application/json",
        "Idempotency-Key": KEY,
        "Connection": "close",
    }
    with httpx.Client(timeout=10) as client:
        return client.post(f"{url}/tasks", content=BODY, headers=headers).status_code


def test_fault_fires_once_per_key_across_two_gunicorn_workers(receiver):
    statuses: list[int] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    # Concurrent rounds keep both sync workers busy, until each has answered this key at least once.
    while len(receiver.worker_pids_that_answered()) < 2 or len(statuses) < 2 * ROUND:
        if time.monotonic() > deadline:
            pytest.fail(f"both workers did not answer within {DEADLINE_SECONDS}s: {statuses}")
        with ThreadPoolExecutor(ROUND) as pool:
            statuses.extend(
                pool.map(lambda _: post_on_a_fresh_connection(receiver.url), range(ROUND))
            )
    assert statuses.count(503) == 1, statuses
    assert statuses.count(201) == 1, statuses
    assert set(statuses) == {503, 201, 200}, statuses
    assert list(FiredFault.objects.using("delivery").values_list("action_key", "kind")) == [
        (KEY, "http_503")
    ]
    assert ReceiverTask.objects.using("delivery").filter(action_key=KEY).count() == 1
