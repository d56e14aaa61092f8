"""docs/benchmarks.md's one-call rows (bench/report.py) say how the reference's clients connected and how each
side's keep-alive connections fell on the receiver's workers: the receiver's CPU a create follows the placement,
so a ratio is read with it."""

from bench import report


def run(**noted) -> dict:
    return {
        "handoffs": 2500,
        "per_second": 300.0,
        "capacity": 320.0,
        "check": {"ok": True},
        **noted,
    }


def test_a_row_names_the_references_stagger_and_both_sides_placement():
    row = report.one_call_row(
        run(
            capacity_stagger_seconds=0.01,
            capacity_connections=[2, 1, 1],
            receiver_connections=[1, 1, 1, 1],
        )
    )

    assert "measured at 320 creates/s (4 plain clients 0.01 s apart, 5 s)" in row
    assert row.endswith("; connections a receiver worker: capacity 2+1+1, this run 1+1+1+1 |")


def test_a_row_from_before_the_placement_was_noted_reads_as_it_did():
    row = report.one_call_row(run())

    assert "measured at 320 creates/s (4 plain clients, 5 s) | 300 handoffs/s | 0.94 of that" in row
    assert "connections a receiver worker" not in row
