"""bench/harness.py `dispatchers_beaten` (the first half of `Bench.dispatchers_started`, which every section
that starts dispatchers calls): a measured run starts once every dispatcher it started has beaten (its start,
about 2 s of CPU a process, no longer runs into the measured run); a beat left by an earlier process of the
same worker name does not count, a dispatcher that exits before beating stops the wait, and the lever's
dispatcher (bench/concurrent_dispatch.py, whose loop of one destination writes no beat of its own) beats once
started."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import dispatchers_beaten

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
    earlier = start(tmp_path, "w-0")
    procs.append(earlier)
    (tmp_path / "go").touch()
    dispatchers_beaten(tmp_path, [earlier], timeout=60)
    (tmp_path / "go").unlink()
    later = start(tmp_path, "w-0")
    procs.append(later)
    with pytest.raises(RuntimeError, match="did not beat"):
        dispatchers_beaten(tmp_path, [later], timeout=1)
    (tmp_path / "go").touch()
    assert dispatchers_beaten(tmp_path, [later], timeout=60) >= 0


def test_a_dispatcher_that_exits_before_beating_stops_the_wait(tmp_path, procs):
    gone = start(tmp_path, "w-1", code="raise SystemExit(1)")
    procs.append(gone)
    with pytest.raises(RuntimeError, match="exited before its first beat"):
        dispatchers_beaten(tmp_path, [gone], timeout=60)


def test_the_levers_dispatcher_beats_once_started(tmp_path, procs):
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DELIVERY_DATABASE_URL")
    }
    env.update(HANDOFF_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings")
    lever = subprocess.Popen(
        [sys.executable, "bench/concurrent_dispatch.py", "--worker", "lever-0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    procs.append(lever)
    assert dispatchers_beaten(tmp_path, [lever], timeout=120) >= 0
