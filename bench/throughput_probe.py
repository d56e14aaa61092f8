"""Quick probe: N handoffs delivered by K dispatchers over HTTP; prints handoffs/s. Used while tuning."""

import sys
import time

from harness import Bench, insert_handoffs_sql

n, k = int(sys.argv[1]), int(sys.argv[2])
bench = Bench("probe").setup()
bench.start_receiver()
dispatchers = bench.start_dispatchers(k, "probe")
bench.dispatchers_started(dispatchers)
with bench.sql() as conn:
    conn.execute(insert_handoffs_sql(1, n))
start = time.monotonic()
while bench.scalar("select count(*) from outbox_handoff where state = 'delivered'") < n:
    time.sleep(0.05)
    if time.monotonic() - start > 300:
        break
elapsed = time.monotonic() - start
print(
    f"{n} handoffs, {k} dispatchers: {elapsed:.2f}s, {n / elapsed:.0f}/s",
    bench.scalar("select count(*) from receiver_task", "delivery") if False else "",
)
print(
    "states",
    bench.scalar(
        "select json_object_agg(state, c) from (select state, count(*) c from outbox_handoff "
        "group by state) s"
    ),
)
print("tasks", bench.scalar("select count(*) from delivery_receivertask", "delivery"))
bench.stop()
