"""A pooled keep-alive connection the receiver closes just as the next request arrives on it (a real server
process, tests/outbox/destinations/idle_closing_receiver.py): a lookup, safe to repeat, is asked once more on a
fresh connection and answers; a create is never sent twice by the connection code (its outcome is uncertain and
settlement reads it). Under gunicorn at load, `test_replay_at_scale` lost a lookup this way and skipped the item."""

import socket
import subprocess
import sys
import time

import pytest

from outbox.destinations.http.destination import HttpDestination
from outbox.failures import Outgoing
from outbox.models import FailureClass
from outbox.payloads import payload_hash
from tests.processes import ROOT, KernelPort, popen_listening

START_DEADLINE_SECONDS = 60.0


@pytest.fixture
def idle_closing(tmp_path):
    """The receiver's URL and its request log (one line per request: answered or dropped)."""
    log = tmp_path / "requests.log"
    log.touch()
    with KernelPort() as held:
        proc = popen_listening(
            lambda fd: [
                sys.executable,
                "-m",
                "tests.outbox.destinations.idle_closing_receiver",
                str(fd),
                str(log),
            ],
            held,
            cwd=ROOT,
        )
        try:
            wait_listening(held.port, proc)
            yield f"http://127.0.0.1:{held.port}", log
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def wait_listening(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the idle-closing receiver did not start")


def requests_seen(log) -> list[str]:
    return log.read_text().splitlines()


def destination(url: str, **contract) -> HttpDestination:
    return HttpDestination(url=url, signing_secret="s" * 32, max_connections=1, **contract)


def test_lookup_on_a_connection_closed_as_it_went_idle_is_asked_again_and_answers(idle_closing):
    url, log = idle_closing
    receiver = destination(url)

    first = receiver.lookup("onboarding:1")
    second = receiver.lookup("onboarding:2")

    assert (first.task_id, second.task_id) == ("task-onboarding:1", "task-onboarding:2")
    assert requests_seen(log) == [
        "answered GET /tasks/onboarding:1",
        "dropped GET /tasks/onboarding:2",
        "answered GET /tasks/onboarding:2",
    ]


def test_batch_lookup_on_a_connection_closed_as_it_went_idle_is_asked_again_and_answers(
    idle_closing,
):
    url, log = idle_closing
    receiver = destination(url, lookup_batch_size=4)

    first = receiver.lookup_many(["onboarding:1", "onboarding:2"])
    second = receiver.lookup_many(["onboarding:3", "onboarding:4"])

    assert {key: task.task_id for key, task in {**first, **second}.items()} == {
        f"onboarding:{n}": f"task-onboarding:{n}" for n in range(1, 5)
    }
    assert requests_seen(log) == [
        "answered POST /tasks/lookup",
        "dropped POST /tasks/lookup",
        "answered POST /tasks/lookup",
    ]


def test_create_on_a_connection_closed_as_it_went_idle_is_sent_once_and_left_uncertain(
    idle_closing,
):
    url, log = idle_closing
    receiver = destination(url)
    payload = {"plan": "standard"}
    receiver.lookup("onboarding:1")

    result = receiver.deliver(
        Outgoing(action_key="onboarding:2", payload=payload, payload_hash=payload_hash(payload))
    )

    assert (result.failure_class, result.reason_code) == (
        FailureClass.UNCERTAIN,
        "connection_lost",
    )
    assert requests_seen(log) == ["answered GET /tasks/onboarding:1", "dropped POST /tasks"]
