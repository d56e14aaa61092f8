"""Retention: settled handoffs leave the hot tables for the archive (docs/operations.md, "Retention";
imported by `config.settings`)."""

from config.env import env_float, env_int

# Age (days since a settled handoff's last change, database clock) after which it is archived.
HANDOFF_RETENTION_DAYS = env_float("HANDOFF_RETENTION_DAYS", 30.0)
# Rows moved per short transaction, and the pause between two of them (room for the dispatchers).
HANDOFF_RETENTION_BATCH_SIZE = env_int("HANDOFF_RETENTION_BATCH_SIZE", 1000)
HANDOFF_RETENTION_PAUSE_SECONDS = env_float("HANDOFF_RETENTION_PAUSE_SECONDS", 0.02)
# PostgreSQL: the longest a batch's statement waits for a lock before the batch gives up (and is tried again
# at the next run); rows locked by someone else are skipped, not waited for.
HANDOFF_RETENTION_LOCK_TIMEOUT_MS = env_int("HANDOFF_RETENTION_LOCK_TIMEOUT_MS", 200)
# Batches of one scheduled run (django-q2, every HANDOFF_RETENTION_EVERY_MINUTES), so that a run stays well
# inside the cluster's task timeout; what is left goes at the next run.
HANDOFF_RETENTION_MAX_BATCHES_PER_RUN = env_int("HANDOFF_RETENTION_MAX_BATCHES_PER_RUN", 50)
HANDOFF_RETENTION_EVERY_MINUTES = env_int("HANDOFF_RETENTION_EVERY_MINUTES", 10)
# What else keeps a settled handoff in the hot tables (a live finding, an unsettled incident member): the
# source's rule, named here so that the outbox imports nothing from reconciliation.
HANDOFF_RETENTION_HOLD_CHECK = "incidents.retention_holds.held_handoff_ids"
# Called with a batch's handoff ids before they leave, in the batch's transaction: /metrics' counters keep
# what those rows counted (reconciliation.models.ArchivedTotal), so a counter never goes down.
HANDOFF_RETENTION_CARRY_OVER = "reconciliation.metric_totals.carry_over"
# The largest share of wall-clock time retention spends inside batches: after a batch of t seconds it rests
# t × (1 − duty) / duty (and at least HANDOFF_RETENTION_PAUSE_SECONDS), so a background job yields to
# delivery, and more so when the machine is busy (a batch then takes longer). 0.1, measured by
# bench/retention_bench.py (docs/benchmarks.md): beside four dispatchers at full speed on 2 cores, delivery
# kept 0.92 of its rate without retention, which moved about 350 rows/s (30 million a day); at 1 (no rest
# but the floor) delivery kept 0.67, at 0.3 0.86, at 0.15 0.91. 1 = only the fixed pause.
HANDOFF_RETENTION_DUTY_CYCLE = env_float("HANDOFF_RETENTION_DUTY_CYCLE", 0.1)
# Delivery first: while at least HANDOFF_RETENTION_YIELD_BACKLOG handoffs are due (the dispatchers are behind),
# no batch begins; retention looks again every HANDOFF_RETENTION_YIELD_CHECK_SECONDS, and after
# HANDOFF_RETENTION_MAX_YIELD_SECONDS of waiting runs one batch anyway, so a backlog that lasts (a destination
# down with its rows due) slows retention to a batch every 10 s and its rest (50-80 rows/s, 4-7 million a day)
# instead of stopping it. 0 = never yield. Measured by bench/retention_bench.py (docs/benchmarks.md).
HANDOFF_RETENTION_YIELD_BACKLOG = env_int("HANDOFF_RETENTION_YIELD_BACKLOG", 100)
HANDOFF_RETENTION_YIELD_CHECK_SECONDS = env_float("HANDOFF_RETENTION_YIELD_CHECK_SECONDS", 0.5)
HANDOFF_RETENTION_MAX_YIELD_SECONDS = env_float("HANDOFF_RETENTION_MAX_YIELD_SECONDS", 10.0)
