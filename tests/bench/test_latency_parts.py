"""The latency rows state the product's share and its parts (bench/e2e.py `latency_parts`): waiting to be
claimed, claiming, signing and sending up to the request's arrival at the receiver, the receiver's own part
(arrival to commit), and recording after it, each a median over the first attempts; the receiver call
beside them. The latency runs from the approval's commit (`from_commit`), its own transaction a part apart.
The times here are given."""

from datetime import UTC, datetime, timedelta

from bench.e2e import from_commit, latency_parts

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def ms(value: float) -> timedelta:
    return timedelta(milliseconds=value)


def test_each_part_is_the_median_of_its_own_interval_over_the_first_attempts():
    approved = {f"k{n}": T0 + ms(100 * n) for n in range(3)}
    # (waited, to the receiver's commit, then to the outcome recorded, the call as the dispatcher timed it)
    ways = {"k0": (2, 10, 4, 12), "k1": (6, 20, 8, 25), "k2": (4, 30, 6, 30)}
    received, firsts = {}, []
    for key, (waited, to_receiver, recording, call) in ways.items():
        started = approved[key] + ms(waited)
        received[key] = started + ms(to_receiver)
        firsts.append((key, started, call, received[key] + ms(recording)))
    assert latency_parts(approved, received, firsts) == {
        "median_wait_to_claim_ms": 4.0,
        "median_claim_to_receiver_commit_ms": 20.0,
        "median_receiver_commit_to_recorded_ms": 6.0,
        "median_receiver_call_ms": 25.0,
    }


def test_a_handoff_the_receiver_has_not_recorded_counts_only_in_its_wait():
    approved = {"k0": T0, "k1": T0}
    received = {"k0": T0 + ms(15)}
    firsts = [("k0", T0 + ms(5), 9, T0 + ms(20)), ("k1", T0 + ms(7), None, None)]
    parts = latency_parts(approved, received, firsts)
    assert parts["median_wait_to_claim_ms"] == 6.0
    assert parts["median_claim_to_receiver_commit_ms"] == 10.0
    assert parts["median_receiver_commit_to_recorded_ms"] == 5.0
    assert parts["median_receiver_call_ms"] == 9.0


def test_the_latency_runs_from_the_approvals_commit_its_transaction_a_part_of_its_own():
    # Each approval: inserted at T, COMMIT sent 3 ms later, returned 5 ms after that; claimed 2 ms after the
    # commit returned, at the receiver's commit 12 ms after it, its call 9 ms.
    approved, commits, received, firsts = {}, {}, {}, []
    for n in range(3):
        key, inserted = f"k{n}", T0 + ms(100 * n)
        sent, committed = inserted + ms(3), inserted + ms(8)
        approved[key], commits[key] = inserted, (sent.timestamp(), committed.timestamp())
        received[key] = committed + ms(12)
        firsts.append((key, committed + ms(2), 9, received[key] + ms(4)))
    figures = from_commit(commits, approved, received, firsts)
    assert figures["median_ms"] == 12.0
    assert figures["median_wait_to_claim_ms"] == 2.0
    assert figures["median_approval_statements_ms"] == 3.0
    assert figures["median_approval_commit_ms"] == 5.0
    # The figures as they were taken before: from the insert, the approval's transaction in them.
    assert figures["median_from_insert_ms"] == 20.0


def test_the_products_share_runs_from_the_approvals_commit_to_the_requests_arrival_at_the_receiver():
    # Committed, claimed 2 ms later, at the receiver 3, 4, 5 ms after the claim, committed there 6, 1, 20 ms
    # after its arrival, its call (the request's and the answer's way and all of the receiver's work) 30 ms:
    # the median less the median call would be negative; the share is the median of commit to arrival.
    commits, received, arrived, firsts = {}, {}, {}, []
    for n, (to_arrival, own) in enumerate([(3, 6), (4, 1), (5, 20)]):
        key, committed = f"k{n}", T0 + ms(100 * n)
        commits[key] = (committed.timestamp(), committed.timestamp())
        arrived[key] = committed + ms(2 + to_arrival)
        received[key] = arrived[key] + ms(own)
        firsts.append((key, committed + ms(2), 30, received[key] + ms(4)))
    figures = from_commit(commits, dict.fromkeys(commits, T0), received, firsts, arrived)
    assert figures["median_ms"] == 11.0
    assert figures["product_share_ms"] == 6.0
    assert figures["median_wait_to_claim_ms"] == 2.0
    assert figures["median_claim_to_arrival_ms"] == 4.0
    assert figures["median_receiver_own_ms"] == 6.0
