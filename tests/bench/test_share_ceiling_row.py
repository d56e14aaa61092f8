"""The product's share of the latency beside this machine's ceiling (issue 40; bench/report.py
`product_share_row`, `share_ceiling`): the aims row still judges the share against 5 ms, and states the
share of a minimal dispatcher measured in the same run (`bench/e2e.py` `latency_pairs`) with the paired ratio
of the two shares; a refused pairing prints its reason, never a ratio. The figures are given; the pairs are
judged by bench/pairs.py."""

from bench.pairs import figure_json, measure_pairs
from bench.report import product_share_row
from tests.bench.scripted import QUIET, scripted

RUN = {
    "median_ms": 30.0,
    "median_wait_to_claim_ms": 3.1,
    "median_claim_to_arrival_ms": 5.5,
    "median_receiver_own_ms": 20.1,
}


def cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def ceiling(reference_shares, product_shares):
    """The pairs as `latency_pairs` takes them: each side's figure is 1000 / its share in ms."""
    figure = measure_pairs(
        "latency_share_reference",
        scripted(*(1000 / ms for ms in reference_shares)),
        scripted(*(1000 / ms for ms in product_shares)),
        groups=QUIET,
        before_seconds=0.01,
    )
    runs = {}
    for n, (ref_ms, product_ms) in enumerate(zip(reference_shares, product_shares, strict=True)):
        runs[(n, "reference")] = {
            **RUN,
            "product_share_ms": ref_ms,
            "median_wait_to_claim_ms": 1.5,
            "median_claim_to_arrival_ms": ref_ms - 1.5,
        }
        runs[(n, "product")] = {**RUN, "product_share_ms": product_ms}
    return figure_json(figure, runs, ("reference", "product"))


def test_the_share_row_states_the_ceiling_its_parts_and_the_paired_ratio():
    paired = ceiling((4.0, 5.0, 6.0), (8.0, 9.0, 10.0))
    aim, measured, judged = cells(product_share_row({**RUN, "product_share_ms": 9.0}, paired))
    assert aim.startswith("the product's own share of the latency < 5 ms")
    assert measured.startswith("9.0 ms of the median 30.0 ms")
    assert (
        "this machine's ceiling, a minimal dispatcher (`bench/reference_dispatcher.py`" in measured
    )
    # The median pair (ratio 5/9 = 0.556) is the second: its reference's share and parts, the product's share.
    assert (
        "its share 5.0 ms (waiting to be claimed 1.5 ms, claiming, signing and sending 3.5 ms)"
        in measured
    )
    assert "against the product's 9.0 ms in the median pair" in measured
    assert "the ceiling's share over the product's 0.55 (median of 3 of 3 pairs" in measured
    assert judged == "missed"


def test_a_share_under_5_ms_is_met_whatever_the_ceiling():
    paired = ceiling((2.0, 2.0, 2.0), (4.0, 4.0, 4.0))
    assert cells(product_share_row({**RUN, "product_share_ms": 4.0}, paired))[2] == "met"


def test_a_refused_pairing_prints_its_reason_and_no_ratio():
    # The reference's third share collapsed (its figure, 1000/ms, below half the other pairs' median).
    paired = ceiling((4.0, 4.0, 40.0), (8.0, 8.0, 8.0))
    measured = cells(product_share_row({**RUN, "product_share_ms": 8.0}, paired))[1]
    assert "the ceiling's share over the product's refused, not published" in measured
