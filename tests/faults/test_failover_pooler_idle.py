"""An idle dispatcher behind PgBouncer through a failover it never sees: one `manage.py dispatch` (a real
process) reaches the source database only through PgBouncer in transaction mode (tests/hosts/pooler.py,
DATABASE_TRANSACTION_POOLER=1); the database is a primary with a streaming replica (pg_basebackup -R,
tests/hosts/postgres_cluster.py).

Replication is cut; the dispatcher then delivers every handoff on the old primary alone, and goes idle, its
connection to the pooler open. The operator switches over behind the pooler (docs/operations.md): PAUSE (the
clients' queries wait, none fails), the primary stopped (immediate), the replica promoted, the pooler
repointed, RESUME. The dispatcher's connection outlives the switch without an error, so the timeline check on
connect never runs again: on the promoted replica every handoff the old timeline claimed and delivered is
pending, and only the check before each claim (HANDOFF_TIMELINE_CHECK_EACH_CLAIM, on with the pooler) has them
looked up, not sent again. Then handoffs inserted on the new primary are delivered once each.
"""

import json

import pytest

from delivery.models import ReceiverTask
from tests.faults.test_dispatch_faults import wait_until
from tests.faults.test_failover import assert_forgotten_ones_looked_up_not_resent, delivered

# The fixture: a primary, its replica and PgBouncer in front of them.
from tests.faults.test_failover_pooler import cluster_behind_pooler  # noqa: F401

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.long,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
BEFORE, AFTER = 30, 20
# The handoffs inserted on the new primary are another workspace's, so that their keys are new.
OLD_WORKSPACE, NEW_WORKSPACE = 7, 8


def _make_handoffs(processes, count: int, workspace: int) -> list[str]:
    """`count` pending handoffs recorded through the pooler (on whatever server it points at now)."""
    code = (
        "import json; from tests.faults.test_dispatch_faults import make_handoffs; "
        f"print(json.dumps(make_handoffs({count}, {workspace})))"
    )
    return json.loads(processes.manage("shell", "-c", code).strip().splitlines()[-1])


def _states(server) -> dict[str, tuple[str, str]]:
    rows = server.sql(
        "SELECT action_key, state, destination_id FROM outbox_handoff", dbname="handoff"
    )
    return {key: (state, task) for key, state, task in rows}


def _calls(server, keys) -> dict[str, int]:
    """Per key, the calls the dispatcher began for it (its attempts, as the new primary records them)."""
    rows = server.sql(
        "SELECT h.action_key, count(a.id) FROM outbox_handoff h "
        "LEFT JOIN outbox_attempt a ON a.handoff_id = h.id WHERE h.action_key = ANY(%s) GROUP BY 1",
        dbname="handoff",
        params=(sorted(keys),),
    )
    return dict(rows)


def test_idle_dispatcher_behind_pgbouncer_through_a_failover_resends_nothing_and_loses_nothing(
    processes,
    cluster_behind_pooler,  # noqa: F811 - the fixture imported above
):
    primary, replica, pooler = cluster_behind_pooler
    processes.migrate_default(primary, DATABASE_URL=primary.url("handoff"))
    processes.base_env.update(DATABASE_URL=pooler.url("handoff"), DATABASE_TRANSACTION_POOLER="1")
    old = set(_make_handoffs(processes, BEFORE, OLD_WORKSPACE))
    primary.wait_replayed_by(replica)
    primary.cut_replication()

    processes.start_receiver()
    dispatcher = processes.start_dispatcher("d1")
    wait_until(
        lambda: old <= delivered(primary),
        timeout=180,
        what="every handoff delivered on the old primary",
        procs=[dispatcher],
    )
    assert {key for key, (state, _) in _states(replica).items() if state == "pending"} == old

    # The switchover behind the pooler: the dispatcher's queries wait while it is paused, none fails.
    pooler.admin("PAUSE")
    primary.stop("immediate")
    replica.promote()
    (promoted_at,) = replica.sql("SELECT now()")[0]
    pooler.point_at((str(replica.sockets), replica.port))
    pooler.admin("RESUME")

    new = set(_make_handoffs(processes, AFTER, NEW_WORKSPACE))
    wait_until(
        lambda: old | new <= delivered(replica),
        timeout=180,
        what="every handoff delivered on the promoted replica",
        procs=[dispatcher],
    )
    assert dispatcher.poll() is None, "the dispatcher exited"
    assert "database unavailable" not in dispatcher.log_path.read_text(), (
        "the dispatcher met a database error: its connection did not outlive the switch"
    )
    # Nothing the old timeline claimed is lost: each key holds the one task the receiver made for it.
    tasks = {
        key: str(task) for key, task in ReceiverTask.objects.values_list("action_key", "task_id")
    }
    states = _states(replica)
    assert {key: states[key][1] for key in old | new} == tasks
    assert_forgotten_ones_looked_up_not_resent(replica, old, promoted_at)
    assert _calls(replica, new) == dict.fromkeys(new, 1), "each new handoff called once"
