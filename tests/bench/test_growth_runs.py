"""bench/e2e.py growth: each table is filled once and only a run's own handoffs go between runs
(`remove_run`), so the preloaded delivered rows stay while the run's rows, their history and the receiver's
tasks are gone (a refill of 1,000,000 rows for every large run took 15 s of the section)."""

import pytest
from django.db import connections

from bench.e2e import remove_run
from bench.harness import PRELOAD_FIRST, Bench, insert_handoffs_sql, insert_receiver_tasks_sql

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_a_run_is_removed_and_the_preloaded_rows_stay():
    bench = Bench(
        source=connections["default"].settings_dict["NAME"],
        delivery=connections["delivery"].settings_dict["NAME"],
    )
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(PRELOAD_FIRST, 50, state="delivered"))
        conn.execute(insert_handoffs_sql(1, 20, state="delivered"))
        conn.execute(
            "INSERT INTO outbox_handoffevent (handoff_id, from_state, to_state, actor_label, action, "
            "reason, at) SELECT id, 'pending', 'delivered', 'bench', '', 'delivered', now() "
            "FROM outbox_handoff WHERE source_id < %s",
            (PRELOAD_FIRST,),
        )
    with bench.sql("delivery") as conn:
        conn.execute(insert_receiver_tasks_sql(1, 20))

    remove_run(bench)

    assert bench.scalar("SELECT count(*) FROM outbox_handoff") == 50
    assert bench.scalar("SELECT min(source_id) FROM outbox_handoff") == PRELOAD_FIRST
    assert bench.scalar("SELECT count(*) FROM outbox_handoffevent") == 0
    assert bench.scalar("SELECT count(*) FROM delivery_receivertask", "delivery") == 0
