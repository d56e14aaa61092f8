"""The dispatcher's heartbeat and the readiness it gives (outbox/dispatch/heartbeat.py, manage.py dispatcher_ready).
Against a real dispatcher process: tests/faults/test_probes.py."""

import json
import time

import pytest
from django.core.management import call_command

from outbox.dispatch import heartbeat


@pytest.fixture(autouse=True)
def _own_var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path


def test_a_fresh_beat_is_ready_and_names_the_worker():
    heartbeat.beat("host-a:12")
    verdict = heartbeat.readiness("host-a:12", within=5)
    assert verdict.ready
    assert "dispatcher host-a:12: loop turning" in verdict.reason


def test_a_beat_older_than_the_bound_is_not_ready(settings):
    heartbeat.beat("w1")
    path = next(heartbeat.heartbeat_dir().glob("*.json"))
    stale = json.loads(path.read_text()) | {"at": time.time() - 60}
    path.write_text(json.dumps(stale))
    verdict = heartbeat.readiness("w1", within=30)
    assert not verdict.ready
    assert "last beat 6" in verdict.reason and "(bound 30s)" in verdict.reason


def test_no_beat_is_not_ready():
    assert heartbeat.readiness("w1", within=30) == heartbeat.Readiness(
        False, "dispatcher w1: no beat yet"
    )
    assert not heartbeat.readiness(None, within=30).ready


def test_without_a_worker_the_latest_beat_of_any_counts():
    heartbeat.beat("w1")
    heartbeat.beat("w2")
    assert heartbeat.last_beat().worker == "w2"


def test_a_damaged_file_is_no_beat():
    heartbeat.heartbeat_dir().mkdir(parents=True)
    (heartbeat.heartbeat_dir() / "w1.json").write_text("{not json")
    assert heartbeat.last_beat("w1") is None


def test_the_probe_command_exits_1_with_the_reason(capsys):
    with pytest.raises(SystemExit) as exited:
        call_command("dispatcher_ready", "--worker", "w9", "--within", "5")
    assert exited.value.code == 1
    assert "not ready: dispatcher w9: no beat yet" in capsys.readouterr().err
    heartbeat.beat("w9")
    call_command("dispatcher_ready", "--worker", "w9", "--within", "5")
    assert "ready: dispatcher w9" in capsys.readouterr().out


def test_a_beat_that_cannot_be_written_never_raises_and_is_logged_once(settings, tmp_path, caplog):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings.VAR_DIR = blocker  # heartbeats/ cannot be made under a file
    assert heartbeat.beat("w1") is False
    assert heartbeat.beat("w1") is False
    assert caplog.text.count("heartbeat not written") == 1
    settings.VAR_DIR = tmp_path
    assert heartbeat.beat("w1") is True
    assert heartbeat.readiness("w1", within=5).ready


def test_a_monotonic_clock_stepped_back_does_not_hold_the_next_beat_back(monkeypatch):
    """libfaketime steps the monotonic clock with the wall clock: five minutes back must not mean five minutes
    without a beat (the readiness probe would call the turning loop stuck)."""
    clock = [1000.0]
    monkeypatch.setattr(heartbeat, "time", _Clock(clock))
    beats = heartbeat.Beats("w1")
    beats.beat()
    path = next(heartbeat.heartbeat_dir().glob("*.json"))
    path.unlink()
    clock[0] += 0.5
    beats.beat()
    assert not path.exists()  # within a second of the last beat: none written
    clock[0] -= 300
    beats.beat()
    assert path.exists()


class _Clock:
    """The `time` module as heartbeat.py reads it, with a monotonic clock the test steps."""

    def __init__(self, reading: list[float]):
        self._reading = reading

    def monotonic(self) -> float:
        return self._reading[0]

    def time(self) -> float:
        return time.time()
