"""bench/e2e.py: the latency run's producers start, say so, and wait for one word to go together
(`producers_go`), so that no approval is timed while another producer is still importing the product."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench.e2e import PRODUCER, producers_go
from tests.processes import bytecode_cache

ROOT = Path(__file__).resolve().parents[2]


def producer(tmp_path: Path, code: str) -> subprocess.Popen:
    # No database URLs: the embedded SQLite default under the test's own directory. The run's bytecode
    # caches, so that the child neither compiles the product again nor writes __pycache__ into the tree.
    env = {
        **(bytecode_cache() or {"PYTHONDONTWRITEBYTECODE": "1"}),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "1",
        "HANDOFF_VAR_DIR": str(tmp_path),
    }
    # 100/s for 0 s: its start, the word and its count, nothing written.
    return subprocess.Popen(
        [sys.executable, "-c", code, "100", "0", "1"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_producer_starts_then_waits_for_the_word_before_it_times_anything(tmp_path):
    proc = producer(tmp_path, PRODUCER)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert proc.poll() is None  # started, and blocked on the word
        # Its approvals' commit times (none in 0 s), then its count.
        assert proc.communicate("go\n", timeout=120)[0].strip().splitlines() == ["{}", "0"]
    finally:
        proc.kill()
        proc.wait()


def test_a_producer_that_never_says_ready_stops_the_run(tmp_path):
    proc = producer(tmp_path, "print(5)")
    with pytest.raises(RuntimeError, match="did not start"):
        producers_go([proc])
    proc.wait()
