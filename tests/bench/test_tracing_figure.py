"""bench/tracing_bench.py judges tracing by the CPU a delivered handoff takes (handoffs per CPU-second of the
dispatcher, the receiver and their backends, on / off), not by the rate of one dispatcher paced by the
receiver, which moved by a fifth between pairs on a quiet machine; the paced rates stay beside, not judged."""

from bench.pairs import measure_pairs
from bench.report import tracing_section
from bench.tracing_bench import summary
from tests.bench.scripted import QUIET, scripted


def _run(per_cpu_second: float, per_second: float, cpu_ms: float, spans: int) -> dict:
    return {
        "per_cpu_second": per_cpu_second,
        "per_second": per_second,
        "cpu_ms_per_handoff": cpu_ms,
        "dispatcher_cpu_ms_per_handoff": 0.8,
        "spans_exported": spans,
    }


def _paired(off: list[dict], on: list[dict]):
    """The figure bench/pairs.py takes from the runs' CPU rates, and the runs as the section keeps them."""
    figure = measure_pairs(
        "tracing_off_per_cpu_second",
        scripted(*(run["per_cpu_second"] for run in off)),
        scripted(*(run["per_cpu_second"] for run in on)),
        groups=QUIET,
        before_seconds=0.01,
    )
    runs = {(n, "off"): run for n, run in enumerate(off)} | {
        (n, "on"): run for n, run in enumerate(on)
    }
    return figure, runs


def test_tracing_is_judged_per_cpu_second_and_the_paced_rate_is_only_shown_beside():
    off = [_run(225.0, 222.0, 4.44, 0), _run(222.0, 250.0, 4.50, 0), _run(224.0, 221.0, 4.46, 0)]
    on = [
        _run(214.0, 262.0, 4.67, 6150),
        _run(210.0, 207.0, 4.76, 6150),
        _run(213.0, 245.0, 4.69, 6150),
    ]
    figure, runs = _paired(off, on)

    result = summary(figure, runs, handoffs=2000)

    assert result["median_ratio"] == 0.951  # 213 / 224: the CPU's, not the paced rates' 1.11
    assert result["met"] is True
    assert result["paced_ratios"] == [1.18, 0.828, 1.109]
    assert result["spans_exported_per_handoff"] == 3
    section = "\n".join(tracing_section(result))
    assert "0.95 (median of 3 of 3 pairs" in section
    assert (
        "| the paced rate on / off (not judged), each pair: 1.18, 0.83, 1.11 | median 1.11 |"
        in section
    )
    assert "4.44 / 4.67 (dispatcher 0.80 / 0.80)" in section


def test_a_runs_spans_are_counted_with_its_warm_up_handoffs():
    """Each run's dispatcher delivers WARM_UP handoffs before the measured ones, traced too: 3 spans for each
    of the handoffs measured alone is fewer than the run exported."""
    off = [_run(225.0, 222.0, 4.44, 0) for _ in range(3)]
    on = [_run(214.0, 262.0, 4.67, 3 * 2000) for _ in range(3)]
    figure, runs = _paired(off, on)

    assert summary(figure, runs, handoffs=2000)["spans_exported_per_handoff"] == "fewer"
