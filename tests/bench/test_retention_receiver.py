"""bench/retention_report.py shows the receiver's cores over each run's span beside the CPU per handoff, and says
when the receiver is the saturated stage: then the CPU per handoff follows the run's length, not its work."""

from bench.retention_report import section


def report(cores: tuple[float, float]) -> dict:
    """A retention report of one pair, as bench/retention_bench.py writes it; `cores` the receiver's."""
    runs = {
        side: {
            "per_second": rate,
            "cpu_ms_per_handoff": cpu,
            "receiver_cores": each,
            "retention_rows_per_second": 300.0,
            "retention_cpu_ms_per_row": 0.16,
        }
        for side, rate, cpu, each in (
            ("without", 400.0, 4.3, cores[0]),
            ("with", 340.0, 5.3, cores[1]),
        )
    }
    return {
        "rows": 1_000_000,
        "handoffs": 3000,
        "dispatchers": 4,
        "pairs": [{**runs, "ratio": 0.85}],
        "median_ratio": 0.85,
        "aim": 0.9,
        "met": False,
        "retention_rows_per_second": 300.0,
        "dispatch_per_second_with": 340.0,
        "dispatch_per_second_without": 400.0,
        "command": "python bench/retention_bench.py",
    }


def test_a_saturated_receiver_is_named_and_its_cores_shown_beside_the_cpu_per_handoff():
    text = "\n".join(section(report((0.96, 0.97)), ""))

    assert "| 4.300 / 5.300 | 0.96 / 0.97 |" in text
    assert "0.96-0.97 of a core" in text
    assert "it is the saturated stage in this section" in text


def test_a_receiver_below_a_core_is_not_called_saturated():
    text = "\n".join(section(report((0.6, 0.97)), ""))

    assert "0.60-0.97 of a core" in text
    assert "saturated" not in text
