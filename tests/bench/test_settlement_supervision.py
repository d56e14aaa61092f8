"""bench/settlement_bench.py reads the dispatchers' supervision apart (their main threads, `supervision_cpu`):
at the bench's --maintain-every it is a cost per second, not per key, and the report names its share of
the dispatchers' CPU. The process here is a real one whose main thread and side thread each burn CPU."""

import subprocess
import sys

from bench.settlement_bench import maintain_every, settler_command, supervision_cpu, tree_cpu
from bench.settlement_report import _cpu

BURN = """
import threading, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
side = threading.Thread(target=burn, args=(0.6,))
side.start(); side.join()  # the side thread's 0.6 s first, alone
burn(0.3)  # then the main thread's: process_time counts the process, so 0.3 s more of it
print("done", flush=True)
time.sleep(60)
"""


def test_supervision_is_the_main_threads_cpu_not_the_whole_process():
    proc = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "done"  # no deadline of ours: CPU time, not wall
        main, whole = supervision_cpu([proc]), tree_cpu(proc.pid)
    finally:
        proc.kill()
        proc.wait()

    assert 0.25 <= main <= 0.5  # the main thread's 0.3 s (and the interpreter's start)
    assert whole >= main + 0.55  # the side thread's 0.6 s is the process's, not supervision's


def settlement_cpu(*, supervision: float) -> dict:
    """A settlement run's CPU figures at 4 dispatchers, as the bench writes them for the report."""
    return {
        "settle": {"dispatchers": 0.9, "database": 0.3, "receiver": 2.0, "total": 3.2},
        "ceiling": 2.6,
        "ceiling_lookups": 2.5,
        "ceiling_writes": 0.1,
        "ratio": 0.81,
        "supervision": supervision,
    }


def test_the_report_names_the_supervisions_share_of_the_dispatchers_cpu():
    cpu = settlement_cpu(supervision=0.17)
    report = {"modes": [{"batch": 1, "cpu_at_4": cpu}]}

    (line, _blank) = _cpu(report)

    assert "the dispatchers 0.900, of which 0.170 their supervision, every 0.05 s" in line
    assert "0.81 of the ceiling by CPU" in line
    assert (
        "of which" not in _cpu({"modes": [{"batch": 1, "cpu_at_4": {**cpu, "supervision": 0}}]})[0]
    )


def test_the_settlers_supervise_every_quarter_second_batched_as_one_key_a_request():
    # A batched run settles 20,000 outcomes and lasts seconds, as one key a request does: at 0.05 s the
    # supervision was a cost per second the ceiling's plain clients do not pay.
    one_key = settler_command("paired-b1-4-0", 3, batch=1)
    batched = settler_command("paired-b100-4-0", 3, batch=100)

    assert one_key[one_key.index("--maintain-every") + 1] == "0.25"
    assert batched[batched.index("--maintain-every") + 1] == "0.25"
    assert one_key[one_key.index("--worker") + 1] == "paired-b1-4-0-3"
    cpu = settlement_cpu(supervision=0.05)
    report = {"modes": [{"batch": 100, "maintain_every": maintain_every(100), "cpu_at_4": cpu}]}
    assert "of which 0.050 their supervision, every 0.25 s" in _cpu(report)[0]
