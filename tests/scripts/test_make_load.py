"""scripts/make_load.py, the load that `make test` is checked under (README.md, "Tests"): it starts its
burners and servers, says how to stop it, and stops every one of them when its time is up or when killed.
Run once a `make test`, in the SQLite streams (it asks for no database: tests/conftest.py): 5.8 s of its
children's CPU a run."""

import os
import signal
import subprocess
import sys
import time

from tests.processes import ROOT

DEADLINE_SECONDS = 120


def _children(pid: int) -> set[int]:
    found = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            found |= {int(child) for child in listed.read().split()}
    return found


def _gone(pids: set[int]) -> bool:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if not any(os.path.exists(f"/proc/{pid}") for pid in pids):
            return True
        time.sleep(0.1)
    return False


def _start(*args: str) -> tuple[subprocess.Popen, set[int]]:
    load = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "make_load.py"), *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    first = load.stdout.readline()
    assert f"pid {load.pid}: 1 CPU burners and 1 servers" in first, first
    assert f"kill {load.pid}" in first
    return load, _children(load.pid)


def test_the_load_ends_with_its_time_and_takes_its_processes_with_it():
    load, children = _start("--load", "3", "--servers", "1", "--seconds", "5")
    assert len(children) == 2, "a burner and a server with its client"
    assert load.wait(timeout=DEADLINE_SECONDS) == 0
    assert "load stopped" in load.stdout.read()
    assert _gone(children)


def test_a_killed_load_takes_its_processes_with_it():
    load, children = _start("--load", "3", "--servers", "1", "--seconds", "600")
    load.send_signal(signal.SIGKILL)
    load.wait(timeout=DEADLINE_SECONDS)
    load.stdout.close()
    assert _gone(children), "no burner or server outlives the script"
