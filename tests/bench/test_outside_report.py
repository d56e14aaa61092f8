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


def staggered(capacity: list[int], outside: list[int], ratio: float, stagger: float | None) -> dict:
    made = pair(capacity, outside, ratio)
    if stagger is not None:
        made["capacity"]["stagger_seconds"] = stagger
    return made


def test_section_says_how_the_reference_connected_and_how_often_each_side_fell_packed():
    report = {
        "dispatchers": 4,
        "handoffs": 2500,
        "chunk": 500,
        "aim": 0.9,
        "met": True,
        "checked": True,
        "describe": "0.93",
        "command": "python bench/outside_check.py",
        "pairs": [
            staggered([2, 1, 1], [1, 1, 1, 1], 0.93, 0.1),
            staggered([1, 1, 1, 1], [1, 1, 1, 1], 0.95, 0.1),
            staggered([4], [3, 1], 0.90, 0.1),
        ],
    }

    lines = outside_report.section(report, "")

    assert (
        "The reference's clients connected 0.1 s apart; connections packed (on at most half as many "
        "workers as connections): the reference in 1 of 3 runs, the dispatchers in 1 of 3." in lines
    )


def test_a_run_from_before_the_stagger_says_its_clients_connected_at_once():
    report_pairs = [staggered([3, 1], [2, 1, 1], 0.85, None)]

    line = outside_report.packed_line(report_pairs)

    assert line.startswith(
        "The reference's clients connected all at once (within a millisecond), as the reference did "
        "until 2026-12-07;"
    )
    assert line.endswith("the reference in 1 of 1 runs, the dispatchers in 0 of 1.")


def test_section_says_each_side_ran_once_uncounted_before_the_pairs():
    report = {
        "dispatchers": 4,
        "handoffs": 2500,
        "chunk": 500,
        "aim": 0.9,
        "met": True,
        "checked": True,
        "describe": "0.93",
        "command": "python bench/outside_check.py",
        "warm_up": {"one_call": {"handoffs": 200}, "capacity": {"per_second": 300.0}},
        "pairs": [pair([2, 1, 1], [2, 1, 1], 0.93)] * 3,
    }

    text = " ".join(outside_report.section(report, ""))

    assert "time from the commit of the run's first transaction" in text
    assert "each side runs once uncounted (200 handoffs, and the reference for a second)" in text
    assert "each side runs once uncounted (no run before the pairs)" in " ".join(
        outside_report.section({**report, "warm_up": {}}, "")
    )


def test_section_shows_postgresql_cpu_beside_each_side_and_a_dash_for_runs_without_it():
    noted = pair([2, 1, 1], [2, 1, 1], 0.93)
    noted["one_call"].update(
        source_database_cpu_ms_per_handoff=0.81, receiver_database_cpu_ms_per_handoff=0.42
    )
    noted["capacity"]["receiver_database_cpu_ms_per_create"] = 0.4
    report = {
        "dispatchers": 4,
        "handoffs": 2500,
        "chunk": 500,
        "aim": 0.9,
        "met": True,
        "checked": True,
        "describe": "0.93",
        "command": "python bench/outside_check.py",
        "pairs": [noted, pair([2, 1, 1], [2, 1, 1], 0.95), noted],
    }

    rows = [line for line in outside_report.section(report, "") if line.startswith("| 1 ")]
    older = [line for line in outside_report.section(report, "") if line.startswith("| 2 ")]

    assert "| 0.81, 0.42; 0.40 | 2+1+1, 2+1+1 |" in rows[0]
    assert "| — | 2+1+1, 2+1+1 |" in older[0]
