"""The aims row of the product's own share of the latency (issue 40: < 5 ms; bench/report.py
`product_share_row`): the latency run's share, approval commit to the request's arrival at the receiver,
judged met or missed, its parts beside it; a run whose receiver did not time its calls is not judged met."""

from bench.report import product_share_row

RUN = {
    "median_ms": 14.5,
    "median_wait_to_claim_ms": 2.1,
    "median_claim_to_arrival_ms": 2.4,
    "median_receiver_own_ms": 9.8,
}


def cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def test_a_share_under_5_ms_is_met_with_its_parts_stated():
    aim, measured, judged = cells(product_share_row({**RUN, "product_share_ms": 4.6}))
    assert aim.startswith("the product's own share of the latency < 5 ms")
    assert measured.startswith("4.6 ms of the median 14.5 ms")
    assert "waiting to be claimed 2.1 ms" in measured
    assert "claiming, signing and sending 2.4 ms" in measured
    assert "the receiver's own part (arrival to its commit) 9.8 ms" in measured
    assert judged == "met"


def test_a_share_of_5_ms_or_more_is_missed():
    assert cells(product_share_row({**RUN, "product_share_ms": 5.0}))[2] == "missed"


def test_a_run_without_the_receivers_timing_is_missed_not_met():
    aim, measured, judged = cells(product_share_row({**RUN, "product_share_ms": None}))
    assert measured.startswith("not measured")
    assert judged == "missed"
