"""bench/pairs.py: a figure is the median of quiet pairs, taken in alternating order, and a run whose
reference collapsed publishes nothing. The measured sides here are real processes or given figures; the
outside load is a real process that burns CPU."""

import json
import os
import signal
import subprocess
import sys
import time

from bench.pairs import (
    DB_PREFIX,
    CpuGroups,
    figure_json,
    measure_pairs,
    shown,
    watched,
    watched_line,
)
from bench.report import tracing_section
from tests.bench.scripted import QUIET, scripted

DEADLINE_SECONDS = 120


def test_reference_collapsed_below_the_other_pairs_refuses_the_figure(idle_file):
    figure = measure_pairs(
        "receiver",
        scripted(430.0, 425.0, 38.0),
        scripted(400.0, 390.0, 37.0),
        groups=QUIET,
        before_seconds=0.01,
    )

    assert figure.ratio is None
    assert figure.as_json()["published"] is False
    assert figure.refused.startswith("pair 3: reference 38.0 below 0.5 of the other pairs' median")
    assert figure.describe().startswith("refused, not published: pair 3")
    assert not idle_file.exists()


def test_reference_collapsed_below_its_idle_figure_refuses_the_figure(idle_file):
    idle_file.write_text(json.dumps({"receiver": {"value": 500.0}}))

    figure = measure_pairs(
        "receiver",
        scripted(38.0, 40.0, 39.0),
        scripted(30.0, 31.0, 32.0),
        groups=QUIET,
        before_seconds=0.01,
    )

    assert figure.ratio is None
    assert "below 0.5 of its idle figure 500.0" in figure.refused
    assert json.loads(idle_file.read_text()) == {"receiver": {"value": 500.0}}


def test_steady_reference_publishes_the_median_and_records_its_idle_figure(idle_file):
    figure = measure_pairs(
        "receiver",
        scripted(430.0, 425.0, 440.0),
        scripted(387.0, 340.0, 440.0),
        groups=QUIET,
        before_seconds=0.01,
    )

    assert figure.ratio == 0.9
    assert figure.describe().startswith("0.90 (median of 3 of 3 pairs, 0 left out")
    assert json.loads(idle_file.read_text())["receiver"]["value"] == 430.0


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def _wait(condition) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_pair_taken_while_an_outside_process_burns_cpu_is_left_out():
    burners: list[subprocess.Popen] = []

    def subject(index: int) -> float:
        if index == 1:
            burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            burners.append(burner)
            _wait(lambda: _cpu_seconds(burner.pid) >= 0.5)
            # Stopped, not killed: it stays in every later snapshot and uses nothing more.
            burner.send_signal(signal.SIGSTOP)
            _wait(lambda: _state(burner.pid) == "T")
        return {0: 90.0, 1: 10.0, 2: 91.0, 3: 92.0}[index]

    groups = CpuGroups(outside=lambda: [burner.pid for burner in burners])
    try:
        figure = measure_pairs(
            "outside",
            lambda index: 100.0,
            subject,
            pairs=4,
            groups=groups,
            max_others_share=0.001,
            before_seconds=0.01,
        )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()

    assert [pair.loaded for pair in figure.pairs] == [False, True, False, False]
    assert figure.pairs[1].during.others_share > 0.001
    assert [pair.during.others_share for pair in figure.pairs if not pair.loaded] == [0, 0, 0]
    assert figure.left_out == 1
    assert figure.ratio == 0.91
    assert "4 pairs, 1 left out" in figure.describe()


def test_pairs_alternate_which_side_goes_first_and_are_at_least_three():
    calls = []

    def side(name):
        def run(index: int) -> float:
            child = subprocess.run(
                [sys.executable, "-c", "import os; print(os.getpid())"],
                capture_output=True,
                text=True,
                check=True,
            )
            calls.append((index, name, int(child.stdout)))
            return 1.0

        return run

    figure = measure_pairs(
        "order", side("reference"), side("subject"), pairs=1, groups=QUIET, before_seconds=0.01
    )

    assert [(index, name) for index, name, _ in calls] == [
        (0, "reference"),
        (0, "subject"),
        (1, "subject"),
        (1, "reference"),
        (2, "reference"),
        (2, "subject"),
    ]
    assert len({pid for _, _, pid in calls}) == 6
    assert [pair.first for pair in figure.pairs] == ["reference", "subject", "reference"]
    assert figure.ratio == 1.0


def test_report_shows_a_collapsed_figure_as_refused_without_its_number():
    figure = measure_pairs(
        "tracing_off",
        scripted(500.0, 510.0, 38.0),
        scripted(480.0, 490.0, 36.0),
        groups=QUIET,
        before_seconds=0.01,
    )
    runs = {(n, side): {"per_second": 1.0} for n in range(3) for side in ("off", "on")}
    tracing = {
        "aim": 0.95,
        "median_ratio": figure.ratio,
        "met": False,
        "spans_exported_per_handoff": 3,
        "command": "tracing_bench.py",
        **figure_json(figure, runs, ("off", "on")),
    }

    section = "\n".join(tracing_section(tracing))

    # The figure's cell is the refusal; the pairs stay listed as the evidence, the collapsed one marked.
    assert "| refused, not published: pair 3: reference 38.0 below 0.5" in section
    assert "0.96:" not in section  # what the two steady pairs would have given as the figure
    assert "0.96, 0.96, 0.95 (collapsed)" in section


def test_measurement_without_reference_is_marked_loaded_when_an_outside_process_burns():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with watched(CpuGroups(outside=lambda: [burner.pid]), max_others_share=0.001) as loaded:
            _wait(lambda: _cpu_seconds(burner.pid) >= 0.5)
        burner.send_signal(signal.SIGSTOP)
        _wait(lambda: _state(burner.pid) == "T")
        with watched(CpuGroups(outside=lambda: [burner.pid]), max_others_share=0.001) as quiet:
            subprocess.run([sys.executable, "-c", "pass"], check=True)
    finally:
        burner.kill()
        burner.wait()

    assert loaded["loaded"] is True
    assert loaded["others_share"] > 0.001
    assert quiet["loaded"] is False
    assert quiet["others_share"] == 0
    assert "LOADED" in watched_line(loaded)


# A process titled as PostgreSQL titles a backend of the bench's database ("bench_…"), started so that it is
# not the bench's descendant (a backend is the postmaster's child): it burns CPU_SECONDS and exits.
# Its database is named by the prefix the bench reads (`BENCH_DB_PREFIX`, "bench" unless set): with it
# set, a fixed "bench_pairs" was no bench database and the test failed.
BACKEND_TITLE = f"postgres: 15/main: root {DB_PREFIX}_pairs [local] SELECT"
CPU_SECONDS = 1.0
BURN = f"import time\nwhile time.process_time() < {CPU_SECONDS}: pass\n"


def test_a_bench_backend_that_exits_inside_the_window_is_the_benchs_cpu_not_others():
    """Fails on the code that read the backends only at a window's two ends: pgbench's connections end before
    the pair does, so their CPU was counted as everybody else's and every pair against pgbench was "loaded"
    on an idle machine (the run of this stop's `make bench`)."""
    groups = CpuGroups(outside=tuple)
    with watched(groups, max_others_share=0.001) as during:
        started = subprocess.run(
            ["bash", "-c", f'(exec -a "{BACKEND_TITLE}" {sys.executable} -c "$0") & echo $!', BURN],
            check=True,
            capture_output=True,
            text=True,
        )
        pid = int(started.stdout.split()[0])
        _wait(lambda: not os.path.exists(f"/proc/{pid}") or _state(pid) == "Z")
        time.sleep(0.5)  # past a sample: the sampler notices it gone
    seconds = during["seconds"] * os.cpu_count()
    assert during["bench_share"] * seconds >= CPU_SECONDS / 2, during


def test_each_orders_median_is_shown_beside_the_judged_median():
    """The destinations' pairs of 2026-12-06: the healthy destination alone first in pairs 1 and 3 (0.887,
    0.885), with the others first in pair 2 (1.111). The median is the majority order's; both are shown."""
    figure = measure_pairs(
        "alone",
        scripted(200.8, 158.9, 171.5),
        scripted(178.2, 176.6, 151.8),
        groups=QUIET,
        before_seconds=0.01,
    )

    assert figure.ratio == 0.887
    assert figure.describe().startswith("0.88 (median of 3 of 3 pairs, 0 left out")
    assert figure.describe().endswith("; by order: reference first 0.89, subject first 1.11)")


def test_a_ratio_is_never_shown_above_what_was_measured():
    """Fails on the code before: the outside check's 0.896 read "0.90" beside "missed" against an aim of 0.9
    (docs/benchmarks.md, 2026-12-07)."""
    assert [shown(ratio) for ratio in (0.896, 0.9, 0.29, 1.0, 0.999, 1.234)] == [
        "0.89",
        "0.90",
        "0.29",
        "1.00",
        "0.99",
        "1.23",
    ]


def test_settle_runs_before_every_run_of_either_side_and_is_kept_by_side():
    calls = []

    def side(name):
        def run(index: int) -> float:
            calls.append(name)
            return 1.0

        return run

    def settle() -> dict:
        calls.append("settle")
        return {"found": len(calls)}

    figure = measure_pairs(
        "settled",
        side("reference"),
        side("subject"),
        groups=QUIET,
        before_seconds=0.01,
        settle=settle,
    )

    assert calls == [
        "settle", "reference", "settle", "subject",
        "settle", "subject", "settle", "reference",
        "settle", "reference", "settle", "subject",
    ]  # fmt: skip
    assert [pair.settled for pair in figure.pairs] == [
        {"reference": {"found": 1}, "subject": {"found": 3}},
        {"subject": {"found": 5}, "reference": {"found": 7}},
        {"reference": {"found": 9}, "subject": {"found": 11}},
    ]
    assert figure_json(figure, {}, ("capacity", "one_call"))["pairs"][1]["settled"] == {
        "subject": {"found": 5},
        "reference": {"found": 7},
    }
