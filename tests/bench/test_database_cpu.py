"""bench/settlement_bench.py's `database_cpu` counts every PostgreSQL process on a database that lived between
two readings: an autovacuum worker (its title ends with the database's name) and a backend that ended before
the second reading (its CPU kept, not subtracted). The processes here are real ones titled as PostgreSQL titles
its own, each burning CPU."""

import subprocess
import sys
import time
import uuid

from bench.settlement_bench import DATABASES, cpu_seconds, database_cpu

BURN = """
import sys, time
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
print("burnt", flush=True)
sys.stdin.read()  # until the test closes it: the process then ends
"""


def titled(title: str) -> subprocess.Popen:
    """A process whose /proc title (argv[0]) is `title`, burning 0.3 s of CPU then waiting on its stdin."""
    return subprocess.Popen(
        [title, "-c", BURN],
        executable=sys.executable,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def sampled_burnt(pid: int) -> bool:
    """Whether the sampler's own thread has read the process's 0.3 s (this reads nothing of /proc itself)."""
    with DATABASES.lock:
        return any(p == pid and cpu >= 0.28 for (p, _start), (_db, cpu) in DATABASES.seen.items())


def burnt_then_ended(proc: subprocess.Popen) -> None:
    """Wait for the burn (CPU time, no deadline of ours), until the sampler has seen it, then end the process.
    A sleep of 1.5 s (six of the sampler's 0.25 s rounds) was a bet on a loaded machine: this waits for it."""
    assert proc.stdout.readline().strip() == "burnt"
    deadline = time.monotonic() + 60
    while not sampled_burnt(proc.pid):
        assert time.monotonic() < deadline, "the sampler never read the burnt process"
        time.sleep(0.05)
    proc.stdin.close()
    proc.wait()


def test_an_autovacuum_worker_started_between_readings_is_counted_from_its_start():
    database = f"bench_{uuid.uuid4().hex[:8]}"
    before = database_cpu(database)
    proc = titled(f"postgres: 15/main: autovacuum worker {database}")
    try:
        burnt_then_ended(proc)
    finally:
        proc.kill()
        proc.wait()

    assert database_cpu(database) - before >= 0.28  # its 0.3 s, though it ended before this reading


def test_a_backend_gone_at_the_second_reading_is_not_subtracted():
    database = f"bench_{uuid.uuid4().hex[:8]}"
    # another database's, whose name begins with this one's: not counted
    other = titled(f"postgres: 15/main: bench {database}x [local] idle")
    proc = titled(f"postgres: 15/main: bench {database} [local] idle")
    try:
        assert other.stdout.readline().strip() == "burnt"
        assert proc.stdout.readline().strip() == "burnt"
        before, its_own = database_cpu(database), cpu_seconds(proc.pid)  # read while it lives
        proc.stdin.close()
        proc.wait()
        after = database_cpu(database)
    finally:
        for each in (proc, other):
            each.kill()
            each.wait()

    assert before >= 0.28
    # the one on `database` alone: the other's 0.3 s is not in it
    assert abs(before - its_own) < 0.1
    assert after >= before  # ended: its CPU stays counted
