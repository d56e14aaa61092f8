"""A failover behind PgBouncer (transaction mode), under load, with real processes: every process (two
dispatchers, the web app serving the receiver) reaches the source database through one PgBouncer
(tests/hosts/pooler.py) with DATABASE_TRANSACTION_POOLER=1, and names only the pooler. The database is a
primary with an asynchronous streaming replica (tests/hosts/postgres_cluster.py).

Mid-load, replication is cut, the primary goes on delivering, then crashes (stop immediate); the replica is
promoted and the pooler repointed at it (its [databases] entry, then RELOAD), as docs/operations.md tells an
operator. The processes' connections to the pooler may outlive the switch (the pooler keeps them while the
server behind changes), so "every connection is new after a failover" does not hold here: what the old
primary delivered after the cut must still be looked up, never sent again, and nothing lost or duplicated.
Beside tests/faults/test_failover.py (a two-host connection string), whose failover and assertions it shares.
"""

import tempfile
from pathlib import Path

import pytest
from django.conf import settings

from tests.faults.test_failover import COUNT, failover_under_load
from tests.hosts.pooler import Pooler
from tests.hosts.postgres_cluster import primary_with_replica

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.long,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


@pytest.fixture
def cluster_behind_pooler():
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="pg-pooler-", dir=settings.VAR_DIR))
    root.chmod(0o755)  # PgBouncer runs as the postgres user under root
    with primary_with_replica(root / "servers") as (primary, replica):
        primary.sql("CREATE DATABASE handoff")
        pooler = Pooler(
            None, root / "pooler", user=primary.user, target=(str(primary.sockets), primary.port)
        )
        pooler.start()
        try:
            yield primary, replica, pooler
        finally:
            pooler.stop()


def test_failover_behind_pgbouncer_repointed_loses_nothing_and_resends_nothing(
    processes, cluster_behind_pooler
):
    primary, replica, pooler = cluster_behind_pooler
    processes.migrate_default(primary, DATABASE_URL=primary.url("handoff"))
    processes.base_env.update(DATABASE_URL=pooler.url("handoff"), DATABASE_TRANSACTION_POOLER="1")
    processes.manage(
        "shell",
        "-c",
        f"from tests.faults.test_dispatch_faults import make_handoffs; make_handoffs({COUNT})",
    )
    # The operator's step after the promotion: the pooler's [databases] entry names it, then RELOAD.
    failover_under_load(
        processes,
        primary,
        replica,
        after_promote=lambda: pooler.point_at((str(replica.sockets), replica.port)),
    )
