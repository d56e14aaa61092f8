"""bench/e2e.py `dispatchers_idle`: a measured run starts once every dispatcher it started has beaten (its
start, about 2 s of CPU a process, no longer runs into the measured run); a beat left by an earlier process of
the same worker name does not count, and a dispatcher that exits before beating stops the wait."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.e2e import dispatchers_idle

ROOT = Path(__file__).resolve().parents[2]
# A stand-in process named like `start_dispatchers`' (`--worker <name>`) that beats through the product's own
# writer once the test lets it (a file appears), then lives until it is stopped.
BEATER = """
import pathlib, sys, time
from django.conf import settings
settings.configure(VAR_DIR=sys.argv[1])
from outbox.dispatch.heartbeat import beat
go = pathlib.Path(sys.argv[1]) / "go"
while not go.exists():
    time.sleep(0.02)
beat(sys.argv[3])
time.sleep(120)
"""


def start(var: Path, worker: str, code: str = BEATER) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, str(var), "--worker", worker], cwd=ROOT)


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def test_waits_for_the_beat_of_the_process_it_started_not_an_earlier_one(tmp_path, procs):
    bench = SimpleNamespace(env={"HANDOFF_VAR_DIR": str(tmp_path)})
    earlier = start(tmp_path, "w-0")
    procs.append(earlier)
    (tmp_path / "go").touch()
    dispatchers_idle(bench, [earlier], timeout=60)
    (tmp_path / "go").unlink()
    later = start(tmp_path, "w-0")
    procs.append(later)
    with pytest.raises(RuntimeError, match="did not beat"):
        dispatchers_idle(bench, [later], timeout=1)
    (tmp_path / "go").touch()
    assert dispatchers_idle(bench, [later], timeout=60) >= 0


def test_a_dispatcher_that_exits_before_beating_stops_the_wait(tmp_path, procs):
    bench = SimpleNamespace(env={"HANDOFF_VAR_DIR": str(tmp_path)})
    gone = start(tmp_path, "w-1", code="raise SystemExit(1)")
    procs.append(gone)
    with pytest.raises(RuntimeError, match="exited before its first beat"):
        dispatchers_idle(bench, [gone], timeout=60)
