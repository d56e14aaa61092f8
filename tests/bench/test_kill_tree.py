"""bench/harness.py `kill_tree`: the crash comparison's SIGKILL of a django-q2 cluster leaves no process of the
tree running. Its sentinel replaces a dead worker at once; killing the workers first and the sentinel last (as
bench/e2e.py's `_kill_tree` did) left a replacement running, orphaned: a `manage.py qcluster` was found still
running after an idle `make bench` (2026-12-07). Real processes: a parent that replaces each of its three
children as soon as it sees it gone."""

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import kill_tree

SENTINEL = """
import subprocess, sys, time
child = [sys.executable, "-c", "import time; time.sleep(120)", sys.argv[1]]
kids = [subprocess.Popen(child) for _ in range(3)]
print("ready", flush=True)
while True:
    for i, kid in enumerate(kids):
        if kid.poll() is not None:
            kids[i] = subprocess.Popen(child)
    time.sleep(0.0005)
"""


def running_with(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line carries `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(name))
    return found


def test_a_sentinel_that_replaces_its_workers_leaves_none_running_after_kill_tree():
    for _ in range(3):
        marker = f"kill-tree-{secrets.token_hex(6)}"
        parent = subprocess.Popen(
            [sys.executable, "-c", SENTINEL, marker], stdout=subprocess.PIPE, text=True
        )
        try:
            assert parent.stdout.readline().strip() == "ready"
            assert len(set(running_with(marker)) - {parent.pid}) == 3  # its three workers
            kill_tree(parent.pid)
            parent.wait(timeout=30)
            time.sleep(0.5)  # a replacement started in the kill's window would be running by now
            assert parent.returncode == -signal.SIGKILL
            assert running_with(marker) == []
        finally:
            for pid in running_with(marker):
                os.kill(pid, signal.SIGKILL)
            if parent.poll() is None:
                parent.kill()
