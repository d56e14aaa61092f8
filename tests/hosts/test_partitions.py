"""Named faults between hosts of their own (tests/hosts/harness.py): PostgreSQL, the receiver and each
dispatcher in a network namespace, real processes, faults made with nftables and the delaying relay (this
kernel has no netem). Each test names the guarantee it checks; the shared checker
(tests/faults/invariants.py) runs after the faults heal."""

import os
import time

import pytest

from tests.faults.invariants import check_invariants

pytestmark = [pytest.mark.postgres, pytest.mark.faults]
DEADLINE = 180.0
# How long the receiver link stays degraded (2 s of delay, 20 % loss): the minute in a soak.
DEGRADED_SECONDS = float(os.environ.get("HOSTS_DEGRADED_SECONDS", "20"))


def wait_until(predicate, *, what: str, hosts=None, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (hosts and hosts.exited()):
        if predicate():
            return
        time.sleep(0.2)
    logs = ""
    for name in hosts.procs if hosts else ():
        logs += f"\n--- {name} ---\n" + hosts.log(name)[-2500:]
    raise AssertionError(f"timed out waiting for {what}{logs}")


def make_handoffs(hosts, count: int) -> list[str]:
    code = (
        "from tests.faults.test_dispatch_faults import make_handoffs; "
        f"print(','.join(make_handoffs({count})))"
    )
    return hosts.manage("shell", "-c", code).strip().splitlines()[-1].split(",")


def one(hosts, sql: str, params=(), alias: str = "default"):
    with hosts.connect(alias) as conn:
        return conn.execute(sql, params).fetchone()


def settled(hosts, keys: list[str]) -> bool:
    return not one(
        hosts,
        "SELECT count(*) FROM outbox_handoff WHERE action_key = ANY(%s) "
        "AND state IN ('pending', 'in_flight', 'uncertain')",
        (keys,),
    )[0]


def assert_guarantees(hosts, keys: list[str], *, attention_allowed: bool = False) -> None:
    with hosts.connect() as outbox, hosts.connect("delivery") as receiver:
        broken = check_invariants(outbox, receiver, keys).broken(
            attention_allowed=attention_allowed
        )
    assert not broken, broken
    assert not hosts.exited(), f"processes exited: {hosts.exited()}"


def test_dispatcher_cut_from_the_database_past_its_lease_has_its_late_outcome_refused(hosts):
    """d1's call reaches the receiver, then d1 loses PostgreSQL for longer than its lease: d2 takes the
    handoff over and settles it by asking the receiver. When the link heals, d1's late "delivered" is
    refused by fencing, and the key is settled once, with one task."""
    [key] = make_handoffs(hosts, 1)
    hosts.start_receiver()
    # Each call takes about 3 s (the relay holds each way 1.5 s): time to cut d1 off mid-call.
    hosts.network.delay("receiver", 3.0)
    hosts.start_dispatcher("d1", HANDOFF_LEASE_SECONDS="10", RECEIVER_READ_TIMEOUT="6")
    wait_until(
        lambda: one(
            hosts,
            "SELECT count(*) FROM outbox_attempt WHERE worker = 'd1' AND outcome = 'in_progress'",
        )[0],
        what="d1's call to start",
        hosts=hosts,
    )
    hosts.network.partition("d1", "db")
    wait_until(
        lambda: one(
            hosts,
            "SELECT count(*) FROM delivery_receivertask WHERE action_key = %s",
            (key,),
            "delivery",
        )[0],
        what="the receiver to create the task",
        hosts=hosts,
    )
    hosts.start_dispatcher("d2", HANDOFF_LEASE_SECONDS="10", RECEIVER_READ_TIMEOUT="6")
    wait_until(
        lambda: (
            one(hosts, "SELECT state FROM outbox_handoff WHERE action_key = %s", (key,))[0]
            == "delivered"
        ),
        what="d2 to settle the handoff",
        hosts=hosts,
    )
    hosts.network.heal()
    wait_until(
        lambda: f"outcome of {key} refused: lease taken over" in hosts.log("d1"),
        what="d1's late outcome to be refused",
        hosts=hosts,
    )

    assert_guarantees(hosts, [key])
    attempt = one(
        hosts, "SELECT worker, outcome, reason_code FROM outbox_attempt ORDER BY id LIMIT 1"
    )
    assert attempt == ("d1", "abandoned", "lease_expired")
    delivered_by = one(
        hosts,
        "SELECT e.actor_label, e.from_state FROM outbox_handoffevent e WHERE e.to_state = 'delivered'",
    )
    assert delivered_by[1] == "uncertain", "settled by asking the receiver, not by d1's late answer"
