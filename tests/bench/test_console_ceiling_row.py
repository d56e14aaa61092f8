"""The console's 20-operators aim beside this machine's ceiling for it (issue 40; bench/console_operators_report.py
`ceiling_text`, `ceiling_verdict`, `ceiling_lines`): the aims row still judges every page against the aim, and
states the median of the same operators asking the least a console page must do (`bench/console_ceiling.py`)
with the product's worst median over it, the median of the pairs' ratios; a refused pairing prints its reason,
never a ratio."""

from bench.console_operators_report import aims_row, section
from bench.pairs import figure_json, measure_pairs
from tests.bench.scripted import QUIET, scripted

AIM = {"median_ms": 50.0, "p95_ms": 150.0}


def report(ceiling_ms, product_ms) -> dict:
    """A run whose pairs gave these worst medians (ms), the ceiling's and the product's, pair by pair."""
    runs = {}
    for n, (ceiling, product) in enumerate(zip(ceiling_ms, product_ms, strict=True)):
        runs[(n, "ceiling")] = {
            "worst_median_ms": ceiling,
            "worst_p95_ms": ceiling * 1.5,
            "pages_per_second": 20_000 / ceiling,
        }
        runs[(n, "product")] = {
            "worst_median_ms": product,
            "worst_p95_ms": product * 1.5,
            "pages_per_second": 20_000 / product,
        }
    figure = measure_pairs(
        "console_operators_ceiling",
        scripted(*(1000 / ms for ms in ceiling_ms)),
        scripted(*(1000 / ms for ms in product_ms)),
        groups=QUIET,
        before_seconds=0.01,
    )
    pages = {"home": {"median_ms": max(product_ms), "p95_ms": 400.0, "requests": 40}}
    return {
        "rows": 1_000_000,
        "operators": 20,
        "rounds": 2,
        "pairs": 3,
        "pair_rounds": 1,
        "fill_seconds": 30,
        "aim": AIM,
        "alone": {"home": {"median_ms": 20.0, "p95_ms": 25.0, "requests": 40}},
        "concurrent": pages,
        "ceiling": figure_json(figure, runs, ("ceiling", "product")),
        "load_average": 1.0,
        "cores": 2,
    }


def test_the_row_states_the_ceiling_and_the_products_worst_median_over_it():
    row = aims_row(report((200.0, 190.0, 210.0), (300.0, 290.0, 320.0)))
    # Pairs' ratios of the product's worst median over the ceiling's: 1.50, 1.53, 1.52; the median 1.52.
    assert (
        "the product's worst median over the ceiling's 1.52 (median of 3 of 3 pairs' ratios" in row
    )
    # The median pair by ratio is the third: 210 ms against 320 ms.
    assert (
        "its worst median of them as the product's): 210.0 ms at 95 pages/s against the product's worst "
        "median 320.0 ms at 62 pages/s in the median pair" in row
    )
    assert "`bench/console_ceiling.py`" in row
    # The aim is still judged page by page, and said out of reach where the ceiling itself misses it.
    assert (
        "back to back: missed (home) (out of reach on this machine: the ceiling's own worst median 210.0 ms)"
        in row
    )


def test_a_ceiling_within_the_aim_is_said_so():
    row = aims_row(report((20.0, 19.0, 21.0), (300.0, 290.0, 320.0)))
    assert "(the ceiling's worst median 21.0 ms is within the aim)" in row
    assert "the product's worst median over the ceiling's 15.24" in row


def test_a_collapsed_ceiling_is_refused_with_its_reason():
    # The third pair's ceiling answered at a fifth of the others' rate: a broken run, not a figure.
    row = aims_row(report((200.0, 190.0, 1000.0), (300.0, 290.0, 320.0)))
    assert "the product's worst median over the ceiling's refused, not published: pair 3" in row
    assert "over the ceiling's 1." not in row


def test_the_section_lists_each_pair_beside_the_pages():
    lines = section(report((200.0, 190.0, 210.0), (300.0, 290.0, 320.0)), "bench command")
    assert (
        "1 rounds of the pages below in each of 3 pairs (pooled) in a thread of its own (the order shifted "
        "per operator); the reference is one operator alone (4 rounds)" in lines[2]
    )
    assert "| 1 | ceiling | 200.0 / 300.0 ms, 100 | 300.0 / 450.0 ms, 67 | 1.50 |" in lines
    assert "| 2 | product | 190.0 / 285.0 ms, 105 | 290.0 / 435.0 ms, 69 | 1.53 |" in lines


def test_a_run_without_the_ceiling_reads_as_before():
    r = report((200.0, 190.0, 210.0), (300.0, 290.0, 320.0))
    del r["ceiling"], r["pairs"]
    assert "ceiling" not in aims_row(r)
    assert not any("ceiling" in line for line in section(r, "bench command"))
