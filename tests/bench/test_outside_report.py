"""docs/benchmarks.md's outside-check section says how each run's connections fell on the receiver's workers and
which pairs fell alike on both sides: the receiver's CPU a create follows the placement, not the caller."""

from bench import outside_report


def run(per_second: float, placement: list[int] | None, **cpu: float) -> dict:
    noted = {} if placement is None else {"receiver_connections": placement}
    return {"per_second": per_second, **cpu, **noted}


def pair(capacity: list[int] | None, outside: list[int] | None, ratio: float) -> dict:
    return {
        "ratio": ratio,
        "capacity": run(
            300.0, capacity, clients_cpu_ms_per_create=0.6, receiver_cpu_ms_per_create=2.5
        ),
        "one_call": run(
            300.0 * ratio,
            outside,
            dispatchers_cpu_ms_per_handoff=1.0,
            receiver_cpu_ms_per_handoff=3.4,
        ),
    }


def test_section_shows_each_runs_placement_and_the_pairs_that_fell_alike():
    report = {
        "dispatchers": 4,
        "handoffs": 2500,
        "chunk": 500,
        "aim": 0.9,
        "met": False,
        "checked": True,
        "describe": "0.85",
        "command": "python bench/outside_check.py",
        "pairs": [
            pair([3, 1], [2, 1, 1], 0.70),
            pair([2, 1, 1], [2, 1, 1], 0.97),
            pair(None, None, 0.80),  # a run from before runs noted their placement
        ],
    }

    lines = outside_report.section(report, "")

    rows = [line for line in lines if line.startswith("| 1 ") or line.startswith("| 3 ")]
    assert rows[0].endswith("| 3+1, 2+1+1 |")
    assert rows[1].endswith("| —, — |")
    assert (
        "Pairs whose two sides fell alike on the receiver's workers: 1 of 3: pair 2 (2+1+1) 0.97."
        in lines
    )
