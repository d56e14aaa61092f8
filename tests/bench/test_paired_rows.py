"""The scaling curve's and growth's rows are pairs too (bench/e2e.py `scaling_pairs`, `growth_pairs`), and the
report never prints a number for a row whose reference collapsed; settlement's 1 and 2 dispatchers likewise
(bench/settlement_report.py). The figures here are given; the pairs are judged by bench/pairs.py."""

from bench.pairs import figure_json, measure_pairs, median_pair
from bench.report import paired_ratio
from bench.settlement_report import section
from tests.bench.scripted import QUIET, scripted


def paired(name, references, subjects, sides):
    figure = measure_pairs(
        name, scripted(*references), scripted(*subjects), groups=QUIET, before_seconds=0.01
    )
    runs = {
        (n, side): {"per_second": value, "dispatchers": 4, "settled_once": True}
        for n in range(3)
        for side, value in zip(sides, (references[n], subjects[n]), strict=True)
    }
    return figure_json(figure, runs, sides)


def test_a_growth_row_whose_small_table_collapsed_is_refused_without_its_number():
    growth = paired(
        "growth_small", (2800.0, 2850.0, 900.0), (2700.0, 2750.0, 2600.0), ("small", "large")
    )
    middle = median_pair(growth)
    row = {**middle["large"], "ratio_to_small_table": growth["ratio"], "paired": growth["describe"]}

    cell = paired_ratio(row, "ratio_to_small_table")

    assert cell.startswith("refused, not published: pair 3: reference 900.0 below 0.5")
    assert "0.96" not in cell.split(" (")[0]  # what the two steady pairs would have given


def test_a_steady_scaling_row_publishes_the_median_of_its_pairs():
    curve = paired(
        "pgbench_2", (3100.0, 3200.0, 3150.0), (2480.0, 2720.0, 2520.0), ("pgbench", "batch")
    )
    row = {
        **median_pair(curve)["batch"],
        "ratio_to_pgbench": curve["ratio"],
        "paired": curve["describe"],
    }

    assert paired_ratio(row, "ratio_to_pgbench").startswith("0.80 (median of 3 of 3 pairs")
    assert row["per_second"] == 2520.0  # the run of the pair with the median ratio


def test_settlement_at_one_dispatcher_with_a_collapsed_ceiling_is_refused_in_the_report():
    ceiling = paired(
        "settlement_ceiling_b100",
        (5000.0, 5100.0, 1500.0),
        (2000.0, 2100.0, 2050.0),
        ("ceiling", "settle"),
    )
    for pair in ceiling["pairs"]:
        pair["ceiling"] = {**pair["ceiling"], "capacity": 12000.0, "writes": 9000.0}
    steady = paired(
        "settlement_ceiling_b100",
        (5000.0, 5100.0, 5050.0),
        (3000.0, 3100.0, 3050.0),
        ("ceiling", "settle"),
    )
    run = {
        "dispatchers": 4,
        "per_second": 3050.0,
        "ratio": 0.25,
        "of_ceiling": 0.6,
        "settled_once": True,
    }
    report = {
        "outcomes": 2000,
        "batch": 100,
        "aim": 0.8,
        "ratio_at_4": 0.25,
        "met": False,
        "command": "settlement_bench.py",
        "modes": [
            {
                "batch": 100,
                "repeat": 3,
                "capacity_keys_per_second": 12000.0,
                "writes_alone_keys_per_second": 9000.0,
                "ceiling_keys_per_second": 5100.0,
                "ceiling_ratio": 0.43,
                "runs": [{**run, "dispatchers": 1}, {**run, "dispatchers": 2}, run],
                "of_ceiling_paired": steady,
                "of_ceiling_paired_by_dispatchers": {"1": ceiling, "2": steady, "4": steady},
            }
        ],
    }

    text = "\n".join(section(report, ""))

    assert "1 dispatcher: refused, not published: pair 3: reference 1,500.0 below 0.5" in text
    assert "2 dispatchers: 0.60 (median of 3 of 3 pairs" in text
