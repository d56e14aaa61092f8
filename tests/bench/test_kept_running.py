"""bench/harness.py `Bench.kept_running`: the dispatchers of a figure start once for all its runs (a start
imports the whole product, about 2 s of CPU a process, and bench/e2e.py's runs each paid it in wall time)
and are stopped after the figure, also when a run fails; a run's own (bench/e2e.py `dispatchers_for_run`)
after the run. The processes are real; only their start is a stand-in (a sleeping process), so that no
database is needed."""

import subprocess
import sys

import pytest

from bench.e2e import dispatchers_for_run
from bench.harness import Bench


class SleepersBench(Bench):
    """A Bench whose dispatchers are sleeping processes, counted as they start."""

    def __init__(self):
        super().__init__("kept_running_test")
        self.starts = 0

    def start_dispatchers(self, count: int, tag: str, **env: str) -> list[subprocess.Popen]:
        self.starts += 1
        procs = [
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            for _ in range(count)
        ]
        self.procs.extend(procs)
        return procs

    def dispatchers_started(self, procs, timeout: float = 300) -> float:
        return 0.0


def test_a_figures_runs_share_one_start_and_the_dispatchers_stop_after_it():
    bench = SleepersBench()
    seen = []
    with bench.kept_running(3, "figure") as running:
        for _ in range(3):  # the runs of one figure
            seen.append(tuple(proc.pid for proc in running))
            assert all(proc.poll() is None for proc in running)

    assert bench.starts == 1
    assert len(set(seen)) == 1 and len(seen[0]) == 3
    assert all(proc.poll() is not None for proc in running)
    assert bench.procs == []


def test_dispatchers_are_stopped_when_a_run_fails():
    bench = SleepersBench()
    with (
        pytest.raises(RuntimeError, match="a run failed"),
        bench.kept_running(2, "figure") as running,
    ):
        raise RuntimeError("a run failed")

    assert all(proc.poll() is not None for proc in running)
    assert bench.procs == []


def test_a_runs_own_dispatchers_stop_after_it_and_a_figures_stay_up():
    bench = SleepersBench()
    with dispatchers_for_run(bench, 2, "run") as own:
        assert len(own) == 2 and all(proc.poll() is None for proc in own)
    assert all(proc.poll() is not None for proc in own)
    assert bench.procs == []

    with bench.kept_running(2, "figure") as kept:
        with dispatchers_for_run(bench, 2, "run", kept) as used:
            assert used == kept
        assert all(proc.poll() is None for proc in kept)
    assert bench.starts == 2
