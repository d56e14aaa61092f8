"""bench/harness.py: a bench script that ends before it stops its processes (a measurement raised, Ctrl-C, a
SIGTERM) leaves none running: `stop_left_running` stops every process a Bench started when the script's own
process ends. bench/e2e.py's `main` stops its Bench only on its last line, so a failed section used to leave
its receiver and dispatchers running. The script and its process are real (a sleeping process stands in for a
receiver, so that no database is needed)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from bench.harness import Bench

bench = Bench("left_running_test", log_dir=Path(sys.argv[2]))
proc = bench.spawn([sys.executable, "-c", "import time; time.sleep(120)"], "sleeper.log")
print(proc.pid, flush=True)
if sys.argv[3] == "raise":
    sys.stdin.readline()  # once the test has seen the process running
    raise RuntimeError("a measurement failed")
time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def _as_from_a_terminal() -> None:
    """Ctrl-C's SIGINT as a terminal's command gets it: a suite started in the background by a shell
    (`make test &`, `nohup`) runs with SIGINT ignored, which every child inherits across exec, and Python then
    never raises KeyboardInterrupt (the loaded run of 2026-12-07 waited 30 s on a script that ignored it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("ending", ["raise", signal.SIGINT, signal.SIGTERM])
def test_no_process_is_left_running_when_the_bench_ends_early(tmp_path, ending):
    script = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(ROOT), str(tmp_path), str(ending)],
        cwd=ROOT,
        preexec_fn=_as_from_a_terminal,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = int(script.stdout.readline())
    try:
        assert alive(started)
        if ending == "raise":
            script.stdin.write("go\n")
            script.stdin.flush()
        else:
            os.kill(script.pid, ending)  # the script alone, not its process group
        script.wait(timeout=30)
        deadline = time.monotonic() + 5
        while alive(started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(started), "the bench's process ended and left what it started running"
        assert script.returncode != 0
        if ending == "raise":
            assert "a measurement failed" in script.stderr.read()
    finally:
        script.kill()
        script.wait()
        if alive(started):
            os.kill(started, signal.SIGKILL)
