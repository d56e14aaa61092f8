"""bench/retention_bench.py: a "with" run begins once `manage.py archive_settled` is in its batches (its first
one committed), not after a fixed second: its start, Django's, costs about 1.2 s of CPU on 2 cores, more than
the rows a run moves, and it is not retention beside delivery. The retention process here is a real one (a
sleeping stand-in, so that no database is needed); the archive's row count is what the database would answer."""

import contextlib
import subprocess
import sys

from bench.harness import Bench
from bench.retention_bench import RETENTION_APP, in_its_batches
from bench.retention_report import section


class ArchiveCounts:
    """The archive's row count as successive reads see it: `first` rows until `reads` reads have been made."""

    def __init__(self, first: int, reads: int):
        self.first, self.reads, self.seen = first, reads, 0

    def execute(self, query, params=None):
        assert "outbox_archivedhandoff" in query
        self.seen += 1
        return self

    def fetchone(self):
        return (self.first + (self.seen > self.reads),)


class StandInBench(Bench):
    """A Bench whose archive count is scripted and whose spawned process sleeps."""

    def __init__(self, counts: ArchiveCounts):
        super().__init__("retention_start_test")
        self.counts = counts
        self.spawned: list[tuple[list[str], dict]] = []

    @contextlib.contextmanager
    def sql(self, which: str = "source"):
        yield self.counts

    def spawn(self, args, log_name, listen=0, **env):
        self.spawned.append((args, env))
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        self.procs.append(proc)
        return proc


def test_a_with_run_begins_only_after_retention_committed_its_first_batch():
    counts = ArchiveCounts(first=12_000, reads=5)
    bench = StandInBench(counts)
    try:
        retention = in_its_batches(bench, "p0-with", duty_cycle="")

        # It kept reading until the count grew past the 12,000 there were before the start.
        assert counts.seen > 5
        assert counts.fetchone()[0] == 12_001
        assert retention.poll() is None  # still running: it is stopped at the run's end
        (args, env) = bench.spawned[0]
        assert args[-1] == "archive_settled"
        assert env["PGAPPNAME"] == RETENTION_APP  # its backend is found by it, for its CPU
    finally:
        bench.stop()


def test_the_report_states_the_cpu_figures_and_says_so_when_not_measured():
    pair = {
        "ratio": 0.95,
        "without": {"per_second": 400.0},
        "with": {"per_second": 380.0, "retention_rows_per_second": 450.0},
    }
    report = {
        "rows": 1_000_000,
        "dispatchers": 4,
        "handoffs": 3000,
        "command": "",
        "median_ratio": 0.95,
        "aim": 0.9,
        "met": True,
        "retention_rows_per_second": 450.0,
        "dispatch_per_second_with": 380.0,
        "pairs": [
            {
                **pair,
                "without": {**pair["without"], "cpu_ms_per_handoff": 2.0},
                "with": {
                    **pair["with"],
                    "retention_cpu_ms_per_row": 0.142,
                    "cpu_ms_per_handoff": 2.1,
                },
            },
            pair,  # a run from before the bench read it
        ],
        "retention_cpu_ms_per_row": 0.142,
        "cpu_ratio": 0.952,
    }

    lines = section(report, "")

    assert (
        "| 1 | 400 | 380 | 0.95 | 450 | 0.142 | 2.000 / 2.100 | not measured / not measured |"
        in lines
    )
    assert (
        "| 2 | 400 | 380 | 0.95 | 450 | not measured | not measured / not measured | "
        "not measured / not measured |" in lines
    )
    assert any("at 0.142 ms of CPU a row" in line for line in lines)
    assert any(
        "By CPU per delivered handoff" in line and ": 0.95, the ratio" in line for line in lines
    )
