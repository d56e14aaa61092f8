"""A failover under load, with real processes: the source database is a PostgreSQL primary with an
asynchronous streaming replica (tests/hosts/postgres_cluster.py), and every process (two dispatchers, the web
app serving the receiver) names both servers in one connection string with target_session_attrs=read-write.

Mid-load, replication is cut (a replica that lags behind, as asynchronous replication allows), the primary
goes on delivering, then crashes (stop immediate) and the replica is promoted. What the old primary
committed after the cut is lost: handoffs it delivered are pending or in flight on the new primary, while the
receiver holds their tasks. The processes reconnect by themselves; the first connection to the new timeline
marks every pending handoff uncertain (outbox/failover.py), so those are looked up, never sent again.
"""

import tempfile
from pathlib import Path

import pytest
from django.conf import settings
from django.db.models import Count

from delivery.models import ReceiverTask
from tests.faults.test_dispatch_faults import wait_until
from tests.hosts.postgres_cluster import multi_host_url, primary_with_replica
from tests.processes import LOCAL_HTTP

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.long,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
COUNT = 800
# Deliveries the replica must have before the cut, and the old primary alone after it.
BEFORE_CUT, AFTER_CUT = 150, 100


def delivered(server) -> set[str]:
    rows = server.sql(
        "SELECT action_key FROM outbox_handoff WHERE state = 'delivered'", dbname="handoff"
    )
    return {key for (key,) in rows}


def receiver_keys() -> set[str]:
    return set(ReceiverTask.objects.values_list("action_key", flat=True))


@pytest.fixture
def cluster():
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="pg-", dir=settings.VAR_DIR))
    with primary_with_replica(root) as (primary, replica):
        primary.sql("CREATE DATABASE handoff")
        yield primary, replica


def test_failover_mid_load_loses_nothing_and_looks_up_what_the_old_primary_sent(processes, cluster):
    primary, replica = cluster
    processes.base_env["DATABASE_URL"] = multi_host_url([primary, replica], "handoff")
    processes.migrate_default(primary)
    processes.manage(
        "shell",
        "-c",
        f"from tests.faults.test_dispatch_faults import make_handoffs; make_handoffs({COUNT})",
    )
    failover_under_load(processes, primary, replica)


def failover_under_load(processes, primary, replica, *, after_promote=lambda: None) -> None:
    """With COUNT handoffs recorded: the receiver and two dispatchers started; replication cut after
    BEFORE_CUT deliveries, the old primary alone delivering AFTER_CUT more, then stopped (immediate); the
    replica promoted (`after_promote`: the operator's step, if any); then every guarantee asserted on it."""
    web = processes.start_receiver()
    dispatchers = [processes.start_dispatcher(name) for name in ("d1", "d2")]

    wait_until(
        lambda: len(delivered(primary)) >= BEFORE_CUT,
        timeout=120,
        what="deliveries before the cut",
        procs=dispatchers,
    )
    primary.wait_replayed_by(replica)
    primary.cut_replication()
    on_replica = delivered(replica)
    wait_until(
        lambda: len(delivered(primary)) >= len(on_replica) + AFTER_CUT,
        timeout=120,
        what="deliveries only the old primary knows",
        procs=dispatchers,
    )
    primary.stop("immediate")
    # Frozen since the cut: what the promoted replica will know. The receiver holds more.
    on_replica = delivered(replica)
    forgotten = receiver_keys() - on_replica
    assert len(forgotten) >= AFTER_CUT
    replica.promote()
    (promoted_at,) = replica.sql("SELECT now()")[0]
    after_promote()

    wait_until(
        lambda: len(delivered(replica)) == COUNT,
        timeout=180,
        what="every handoff delivered on the promoted replica",
        procs=dispatchers,
    )
    assert all(proc.poll() is None for proc in dispatchers), "a dispatcher exited"
    ready = LOCAL_HTTP.get(web.replace("/delivery/api", "/readyz"), timeout=10)
    assert ready.status_code == 200, ready.text
    for proc in dispatchers:
        proc.terminate()
        proc.wait(timeout=60)

    assert_one_task_per_key_held_by_its_handoff(replica)
    assert_delivered_once_under_one_lease(replica)
    assert_forgotten_ones_looked_up_not_resent(replica, forgotten, promoted_at)
    report = processes.manage("reconcile", "--strict", "--no-progress")
    assert "clean: source and receiver agree; no findings" in report


def assert_one_task_per_key_held_by_its_handoff(server) -> None:
    duplicates = ReceiverTask.objects.values("action_key").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicates.exists(), list(duplicates[:5])
    tasks = dict(ReceiverTask.objects.values_list("action_key", "task_id"))
    held = dict(
        server.sql("SELECT action_key, destination_id FROM outbox_handoff", dbname="handoff")
    )
    assert len(held) == COUNT
    assert {key: str(task) for key, task in tasks.items()} == held


def assert_delivered_once_under_one_lease(server) -> None:
    # Fencing across the switch: no handoff recorded delivered twice, no attempt left open, no lease held.
    twice = server.sql(
        "SELECT handoff_id FROM outbox_handoffevent WHERE to_state = 'delivered'"
        " GROUP BY handoff_id HAVING count(*) > 1",
        dbname="handoff",
    )
    assert not twice, f"{len(twice)} handoffs recorded delivered twice"
    open_attempts = server.sql(
        "SELECT count(*) FROM outbox_attempt WHERE outcome = 'in_progress'", dbname="handoff"
    )
    assert open_attempts == [(0,)]
    leased = server.sql(
        "SELECT count(*) FROM outbox_handoff WHERE lease_owner <> ''", dbname="handoff"
    )
    assert leased == [(0,)]


def assert_forgotten_ones_looked_up_not_resent(server, forgotten: set[str], promoted_at) -> None:
    resent = server.sql(
        "SELECT h.action_key FROM outbox_attempt a JOIN outbox_handoff h ON h.id = a.handoff_id"
        " WHERE a.started_at >= %s AND h.action_key = ANY(%s)",
        dbname="handoff",
        params=(promoted_at, sorted(forgotten)),
    )
    assert not resent, (
        f"{len(resent)} of {len(forgotten)} handoffs the old primary sent were sent again: {resent[:5]}"
    )
    marked = server.sql(
        "SELECT count(DISTINCT e.handoff_id) FROM outbox_handoffevent e"
        " JOIN outbox_handoff h ON h.id = e.handoff_id"
        " WHERE e.actor_label = 'database failover' AND h.action_key = ANY(%s)",
        dbname="handoff",
        params=(sorted(forgotten),),
    )[0][0]
    assert marked > 0, "no forgotten handoff was marked by the failover"
    print(f"{len(forgotten)} handoffs forgotten by the failover, {marked} marked and looked up")
