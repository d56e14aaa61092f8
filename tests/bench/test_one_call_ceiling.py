"""The one-call aim beside this machine's ceiling for it (issue 40; bench/report.py `one_call_cell`,
`one_call_ceiling`): the aims row still judges the product against the receiver's capacity (plain clients that
keep nothing), and states the rate of as many minimal dispatchers that keep their work in PostgreSQL
(`bench/e2e.py` `one_call_ceiling_pairs`) with the paired ratio of the product's rate to theirs; a refused
pairing prints its reason, never a ratio."""

from bench.pairs import figure_json, measure_pairs
from bench.report import one_call_cell
from tests.bench.scripted import QUIET, scripted


def paired(name, reference, subject, runs):
    figure = measure_pairs(
        name, scripted(*reference), scripted(*subject), groups=QUIET, before_seconds=0.01
    )
    return figure_json(figure, runs, ("reference", "product"))


def results(ceiling_rates, product_rates) -> dict:
    runs = {}
    for n, (ceiling, product) in enumerate(zip(ceiling_rates, product_rates, strict=True)):
        runs[(n, "reference")] = {"per_second": ceiling, "dispatchers": 4}
        runs[(n, "product")] = {"per_second": product, "dispatchers": 4}
    single = [
        {"per_second": rate, "capacity": 500.0, "check": {"ok": True}} for rate in product_rates
    ]
    return {
        "receiver_capacity": [{"per_second": 500.0}],
        "throughput_single_calls": {**single[1], "pairs": single},
        "one_call_ceiling": paired("one_call_ceiling", ceiling_rates, product_rates, runs),
    }


def test_the_one_call_cell_states_the_ceiling_and_the_products_ratio_to_it():
    r = results((420.0, 400.0, 440.0), (360.0, 380.0, 370.0))
    cell = one_call_cell(r, 0.74)
    assert cell.startswith("0.74 (median of 3 pairs' ratios")
    assert "This machine's ceiling for a dispatcher that claims from PostgreSQL" in cell
    # The median pair by ratio (370/440 = 0.84, 360/420 = 0.857, 380/400 = 0.95) is the first.
    assert "4 minimal dispatchers (`bench/reference_dispatcher.py`" in cell
    assert "420/s against the product's 360/s in the median pair" in cell
    assert "the product's rate over the ceiling's 0.85 (median of 3 of 3 pairs" in cell


def test_a_run_without_the_ceiling_reads_as_before():
    r = results((420.0, 400.0, 440.0), (360.0, 380.0, 370.0))
    del r["one_call_ceiling"]
    assert "ceiling" not in one_call_cell(r, 0.74)


def test_a_collapsed_ceiling_is_refused_with_its_reason():
    r = results((420.0, 400.0, 40.0), (360.0, 380.0, 370.0))
    cell = one_call_cell(r, 0.74)
    assert "the product's rate over the ceiling's refused, not published" in cell
