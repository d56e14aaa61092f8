"""Writes docs/benchmarks.md from the figures `make bench` measured in this run."""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import (  # noqa: E402
    console_operators_report,
    outside_report,
    retention_report,
    search_report,
    settlement_report,
)
from bench.budget import budget_lines  # noqa: E402
from bench.pairs import median_pair, method_lines, pair_marks  # noqa: E402

AIM_RATIO_TO_PGBENCH = 0.3
AIM_TIMES_ALTERNATIVE = 3.0
AIM_MEDIAN_LATENCY_MS = 20.0
AIM_P99_LATENCY_MS = 100.0
# The product's own share of the median latency: the approval's commit to the request's arrival (issue 40).
AIM_PRODUCT_SHARE_MS = 5.0
AIM_RATIO_TO_RECEIVER = 0.9  # one call per handoff (issue 40)
AIM_BACKLOG_TO_RECEIVER = 0.8  # a backlog drained under an operator's limit
AIM_GROWTH_RATIO = 0.9
AIM_CONSOLE_MEDIAN_MS = 50.0
AIM_CONSOLE_P95_MS = 80.0
AIM_RECONCILE_KEYS_PER_S = 50_000
AIM_RECONCILE_KEYS = 10_000_000
AIM_DESTINATIONS_RATIO = 0.9
# Bounded memory: RSS at the end of a run at most this much above its RSS after the first tenth of the keys.
MEMORY_SLACK = 0.10

WHERE_TIME_GOES = """\
Earlier tuning (profiled with pyinstrument on `manage.py dispatch --once` over 1,000 handoffs): outcome
writes went from one transaction per handoff to one `UPDATE … FROM (VALUES …)` per table per batch
(`outbox/bulk_writes.py`), and the receiver commits once per call, its batch in three statements. What
the figures of this run say:

- **Batched path, 1 to 8 dispatchers.** Two dispatchers are worth 1.2 to 1.8 of one and four 1.4 to 1.9
  (three runs on one day); beyond that the two cores are shared by PostgreSQL, gunicorn, the dispatchers and
  the load generator, so the curve goes flat while pgbench (one small C process per client) keeps climbing.
  That is why the ratio to pgbench falls with the client count; on more cores (or more hosts) the
  dispatchers stop taking turns. The partial indexes (see "Growth") raised the batched rate itself: 4
  dispatchers delivered 716 to 954 handoffs/s in the runs before them, 1,622/s and 1,652/s in the two runs
  after.
- **One call per handoff.** Each dispatcher makes its claim batch's calls one after another and records their
  outcomes in one commit (in `bench/lever_single_calls.py`'s two splits this alone took the ratio from 0.27
  to 0.68 and from 0.32 to 0.78). The reference is 4 plain client processes that only sign and send (with
  urllib3, the dispatchers' own HTTP client, so that neither side pays more per request for its client); our
  4 dispatchers also claim, keep leases, and write attempts, events and outcomes, on the same two cores as
  the receiver and PostgreSQL. Measured per handoff from `/proc` (CPU of each process group over a run): the
  reference spends about 0.47 ms in its clients, 2.5 ms in gunicorn and 0.7 ms in PostgreSQL; the one-call
  path about 0.8 ms in the dispatchers, 2.6 ms in gunicorn and 0.95 ms in PostgreSQL. The path went from
  about 0.63 to above 0.8 of same-machine capacity in these steps: a batch of deliveries recorded in one
  statement (`outbox/delivered.py`); three index writes fewer per handoff (migration `0010`); that
  statement's rows sent as one array per field that differs between rows, so its text no longer grows
  with the batch (a dispatcher's CPU for the record from 0.145 to 0.10 ms a handoff, by process time around
  each step of a 4,000-handoff drain); a delivered answer no longer worded as a failure would be (0.03 ms);
  and, in the bench itself, polling for the end of a run on one connection (a connection per poll cost the
  measured run about 0.7 ms of PostgreSQL CPU a handoff, which the reference did not pay). The reading
  changed with the receiver's deployment: with 2 gunicorn workers its capacity had two levels from one
  measurement to the next (which worker process each of the 4 keep-alive connections landed on; 334-503
  creates/s), so the figure divided the median one-call run by the most the receiver answered in the run,
  a conservative reading (0.79 in the last run read that way). With gunicorn's recommended 2 × cores + 1
  workers the capacity no longer has two levels (494-506/s in five back-to-back measurements), and the aim
  is read pair by pair: each one-call run divided by the capacity measured just before it, the median of
  five pairs; the conservative reading stays in the row beside it. Every call of a claim batch in flight at
  once (the lever row, `bench/concurrent_dispatch.py`) delivers about what the product path does in the
  same run: concurrency is for a receiver that is far away or slow, not one on the same two cores.
  Until 2026-12-06 a product run started 2.5 s after its 4 dispatchers did, and a start imports the whole
  product (about 2 s of CPU a process): on two cores the starts ran on into the measured run, which the
  reference's clients (forked from a loaded process) never paid. A run now starts once each dispatcher has
  beaten and listens for wake-ups (`bench/harness.py` `Bench.dispatchers_started`; since then the other
  sections that start dispatchers, the lever's `bench/concurrent_dispatch.py` among them, wait the same way,
  and tracing's dispatcher CPU a handoff no longer counts the start). Alternated with the fixed wait at a
  load of 6-8 (CPU of each process from `/proc`, per handoff over the measured run): the dispatchers' CPU
  went from 3.7-6.2 to 1.2-1.5 ms a handoff, and the reference's CPU a request over the product's a handoff
  from 0.49-0.66 to 0.71-0.86.
  Where a one-call handoff's CPU goes (2026-12-06, a dispatcher's turn, `_serve_turn`, looped in one process
  over a backlog of 2,000-3,000 handoffs, claim batch 20, the receiver under gunicorn; process time and the
  backend's `/proc` time, taken at a load of 6 to 18 beside four other engineers' work, so compare them with
  each other, not with the tables): the dispatcher 0.77-1.07 ms a handoff and its PostgreSQL backend
  0.25-0.33 ms. The call itself costs the dispatcher about what it costs the reference: the reference's plain
  client loop 0.66 ms a request in one process, `HttpDestination.deliver` 0.75 ms in the same conditions
  (signing 8.5 µs, the body's JSON 3 µs; the rest is urllib3 and http.client on both sides). The difference
  is the turn: 4 statements whatever its size when measured (the destination's row, its limits and breaker, the
  claim, the outcomes; no BEGIN or COMMIT, each is its own transaction; since 2026-12-07 2 on PostgreSQL, the
  reads and the claim one statement, see below; pinned by `tests/outbox/test_dispatch_turn.py`),
  about 3 ms of the dispatcher's Python a turn (the outcome statement 1.6 ms for 20 rows, most of it building
  and quoting its arrays; the claim 0.8 ms; the limits' permit 0.3 ms) and, in PostgreSQL, the claim and the
  outcome (two updates of the handoff's row that are not HOT, each an entry in every full index, two event
  rows, an attempt written twice) and their planning, 0.6 ms each a turn. Measured per turn size, alternated:
  a claim batch of 50 single calls instead of 20 took the backend from 0.31-0.35 to 0.20 ms a handoff
  (statements 0.2 to 0.1 a handoff). Taken whole (4 `manage.py dispatch` processes started and idle, 2,500
  handoffs, four alternated pairs at a load of 7-12, CPU of each process from `/proc` over the run), it did
  not pay: the backends 0.34-0.56 against 0.25-0.38 ms a handoff, the dispatchers 1.26-1.52 against
  1.32-1.72, both together lower at 50 in one pair of four; HANDOFF_CLAIM_BATCH stays 20, which also keeps
  fewer claims waiting behind a batch's calls and fewer leases to settle when a dispatcher dies. One lane a
  destination instead of two (HANDOFF_DISPATCH_LANES=1: 4 calls in flight, as the reference's 4 clients)
  cost more in three pairs of four (all of it, the receiver's too: 7.1-8.9 against 6.4-7.3 ms a handoff).
  Built: the destination's row is read by a statement compiled once per process instead of through the ORM
  at every turn (`outbox/destinations/registry.py`): 389 to 102 µs of CPU a turn; and a batch's receipts go
  to the outcome statement as one JSON document, each row taking its element by position
  (`outbox/delivered.py`), instead of an array of `jsonb` that psycopg quotes element by element: 284 µs for
  20 receipts against 20 µs. Built since (2026-12-06): the claim's constants (the due states, the empty
  ordering key) written into its text, so that a generic plan can use the partial claim index, and four
  statements of a turn prepared on each connection (`lib.databases.prepared_cursor`: the destination's row,
  the limits, the claim, the outcome; off behind a transaction pooler, `DATABASE_PREPARED_STATEMENTS`):
  PostgreSQL had planned the claim at every turn, about 0.5 ms, ten times an empty claim's run. Measured
  from `/proc/<backend>/schedstat` around each statement in `manage.py dispatch` processes, off and on
  alternated at a load of 3-16: one call per handoff (4 dispatchers, batches of 20) the backends'
  statements 0.344-0.374 to 0.265-0.333 ms a handoff; the latency scenario (2 dispatchers, NOTIFY
  wake-ups) 2.7-4.4 to 1.45-2.9 ms a handoff. The dispatchers' own Python did not move. Before the
  constants were in the text, preparing alone did not pay: 0 generic plans of 206. Tried and left out, each
  alternated with the code before it: the outcome's arrays sent apart from the statement (server-side
  binding): psycopg still writes a list as text, 1.6 ms a 20-row record either way; four lanes instead of two
  (turns a handoff 1.3 to 1.9, a turn's CPU up about 15%: about half the woken turns claim nothing); the
  search index's upkeep (about 10 µs a handoff an update). Built since (2026-12-07), though it was left out
  once as not measurable: a database-clock time (`outbox/clock.py` `DbNow`) states its identity instead of
  Django deriving it by binding the constructor's signature, so the outcome statement compares its rows' times
  (two a handoff) cheaply: building the statement went from 32 to 22 µs a handoff (process time in one
  process, the best of 5 rounds of 300 batches of 20), about 1% of a dispatcher's CPU a handoff, below what a
  live run resolves. What is left against the reference: the dispatchers use about 1.14 ms of CPU a
  handoff against the plain clients' 0.75, and their backends 0.28-0.35 ms the reference does not pay,
  against about 4.5 ms in the receiver; most of the backends' share is writing the rows (two updates of the
  handoff that cannot be HOT, two event rows, the attempt written twice). Next levers: a claim that writes
  no event row of its own (the attempt already says when and by whom: one insert and its index entries a
  handoff; it changes the rule that every transition writes an event), a lease kept where updating it is a
  HOT update (issue 40's settlement lever), and a wake-up that rouses one dispatcher rather than all.
- **Latency.** Two producer processes writing approvals through Django reach about a third of the rate
  asked (half the best batched rate) on two cores (see "approvals at … (asked …)"), so the aim's rate is
  not reached at all here. Since 2026-12-06 nothing is timed before every process of the run has started
  (`bench/e2e.py`: the dispatchers have beaten, the producers have said they are ready and are told to go
  together): a start imports the whole product, about 2 s of CPU, which earlier runs timed beside the first
  approvals; in alternated pairs at a load of 7-8 the two ways did not separate. The median splits into
  waiting to be claimed (commit, NOTIFY, wake-up, and
  the rest of the cycle a dispatcher is in when the approval commits) and the receiver call, about half
  each. At this rate the dispatchers are busy nearly all the time (counted in one run: about 85% of their
  cycles claimed something, 4 handoffs a cycle), so the wait is mostly the rest of a cycle, and a cycle
  is mostly round trips to a PostgreSQL that shares the cores. A cycle took 14 round trips; the claim is now
  one statement that also writes the attempt and the claim event (`WITH … UPDATE … RETURNING, INSERT`,
  4 fewer) and the destination's row is read once for the limits and the breaker (1 fewer): in same-machine
  runs of the latency scenario the median went from 32.6 ms to 27.6 ms, then 24.7 ms. A batch of plain
  deliveries is now recorded by one statement too (`outbox/delivered.py`: the rows still carrying the
  claims' fencing tokens locked in id order, moved to delivered, their events written and attempts
  finished, and the breaker's "nothing to reset" answered), so a healthy cycle is 3 round trips instead
  of 9: with 4 dispatchers the median went to 21.5 ms. Each commit's NOTIFY wakes every dispatcher, and on
  two cores the extra wake-ups of 4 dispatchers take CPU from the producers and the receiver: in
  alternated same-machine runs 2 dispatchers measured 16.5 and 17.1 ms (at 366/s and 341/s), 4 measured
  21.5 and 21.7 ms (at 231/s and 270/s), 1 measured 17.6 ms (at 489/s). So the aim's figure is taken with
  one dispatcher per core, and the best batched count is the comparison row. What each extra dispatcher
  costs at a low rate (20/s from one producer for 10 s, batch receiver, 1, 2 and 4 dispatchers alternated
  twice, CPU from `/proc` a handoff, at a load of 5-7): the dispatchers 4.4-4.6, 6.8-6.9 and 9.6-11.4 ms,
  their backends 4.9, 6.7-7.2 and 10.0-11.5 ms; each woken dispatcher takes a turn (the destination's row,
  the limits' permit and its release, the claim) whether or not it claims anything. The backends' share is
  inflated here: other engineers' fills kept evicting `shared_buffers`, and the claim's plan showed its
  backend reading and writing pages for the event's insert (4.6 of its 5.4 ms). Attempting
  delivery in the committing process right after commit (the lever row) lost again: its calls take the
  producer's CPU, so the producers reached less than half their rate and the latency rose. At an equal
  rate of 20/s (`bench/lever_single_calls.py`, one call per handoff, two earlier runs) it lost once
  (median 118 ms against 39 ms) and tied once (120 ms against 129 ms). With NOTIFY in the approval
  transaction a dispatcher is already woken at commit; the inline attempt adds a second claimant and the
  committing process's CPU, not a shorter path.
  The product's share is judged beside this machine's ceiling, measured in the same run: each of the three
  latency runs at half the best rate is paired (`bench/pairs.py`, the order alternating) with a run of as
  many minimal dispatchers (`bench/reference_dispatcher.py`: graphile-worker's path, the aim's anchor at 4.16
  ms from enqueue to start; LISTEN, one `UPDATE … WHERE id IN (SELECT … FOR NO KEY UPDATE SKIP LOCKED LIMIT n)
  RETURNING` on the product's claim index, the product's signing and HTTP libraries on a kept connection, one
  statement recording the outcome) against the same producers, asked rate and receiver, each side's
  dispatchers started for its run alone. The reference leaves out what the product must do and pays for: the
  limits' permit and the breaker, the destination's row read at each turn, the claim's attempt and event
  rows, a wake-up handed from the listening thread to a worker's, leases kept, spans. Its share is what a
  dispatcher can reach on these cores at that rate; the aims row prints it, the product's, and the median of
  the pairs' ratios (the reference's share over the product's: 1.0, no dearer than the ceiling). In the first
  such pairs (2026-12-07, `--latency-only`, loads of 10-20 from other engineers' work, every pair loaded and
  so not published) the reference's share was 10-20 ms against the product's 14-32 ms; the gap was mostly
  waiting to be claimed (0.6-1.7 ms against 2.9-9.0 ms) and the dispatchers' CPU per handoff (1.8-2.8 ms
  against 3.4-4.6 ms, `/proc`). A delivery turn then made two round trips before its claim, the destination's
  row and its limits; they became one statement (`outbox/dispatch/runner.py` `_turn_reads`: 227 to 135 µs
  of a dispatcher's CPU a turn, 120 to 80 µs of its backend's, in interleaved blocks), and on PostgreSQL
  that statement now also claims (`outbox/dispatch/claims.py` `handoff_claim_turn`) when nothing needs a
  statement of its own (no live hold, no breaker pause, neither limit set, the destination's row unchanged
  since the last turn): a turn with work is 2 statements (claim, outcomes), a woken turn that finds nothing 1.
  Otherwise, and on a destination's first turn in a process and on SQLite, the turn takes the old path
  (`_turn_reads`, the permit, the breaker, the claim). What is left of the wait is the turn's own work
  before its one statement;
  of the CPU, the claim's attempt and event rows and the outcome's services, which the reference leaves out.
  The product's own share of the latency (its aims row, issue 40: < 5 ms) is measured, not subtracted: the
  bench's receiver (`bench/receiver_timing.py`: `config.wsgi` wrapped, under a gthread worker that notes when
  its poller hands a request to a thread) notes for each create call when it reached the receiver (its bytes
  there to read), when its handler started and when the receiver's transaction committed, on `time.time()`,
  the clock the producers note their approvals' commits on and PostgreSQL stamps the claims with (one host).
  The latency runs to that commit; the receiver's own part is its call's arrival to its commit; the share is
  the median over handoffs of the latency less the receiver's own part, that is the approval's commit to the
  request's arrival. Until 2026-12-07 the share was the median less the median receiver call as the dispatcher
  times it, which holds the request's way, the answer's way back and the receiver's work after its commit:
  -2.5 ms, no measure of anything. Its parts, each a median over the first attempts: waiting to be claimed
  (the approval's commit to the claim statement: NOTIFY, the wake-up, the rest of the dispatcher's turn),
  claiming, signing and sending (the claim statement to the arrival: the claim, earlier calls of its batch,
  signing, the request's way); beside them the receiver's own part, the receiver's commit to the outcome
  recorded, and the receiver call (`bench/e2e.py` `latency_parts`). The claim statement's end and the
  request's sending are not noted by the product; one diagnostic run on 2026-12-07 noted them (dispatchers
  with both noted, 2 dispatchers, a load of 2-5, not part of the bench): at 20/s a share of 3.6-3.8 ms was
  waiting to be claimed 1.3-1.5 ms, the claim statement 1.2-1.4 ms, its end to the sending 0.26 ms, the
  sending to the receiver's handler about 0.7 ms; at 90-128/s (asked 2,138/s) a share of 8.8-11.4 ms was
  waiting 2.2-2.5 ms, the claim statement 2.9-4.0 ms (its commit's WAL flush among the producers' and the
  outcomes'), 0.25 ms to the sending and 2.8-3.7 ms from the sending to the receiver's handler (the receiver's
  queue on cores the bench saturated: these runs took the handler's start as the arrival; since the arrival is
  the poller's hand-off, the wait for a thread and the parsing, 0.5-2 ms at a load of 8-10, are the
  receiver's), the receiver's own part 16-20 ms. Since 2026-12-06 the latency runs from the approval's commit,
  as the issue's aim names it (each producer notes when its COMMIT returned; `from_commit`), not from the
  outbox row's `created_at`, which is the approval transaction's start: until then every latency figure and
  the waiting part held the approval's own statements and its COMMIT (the WAL flush, before which no NOTIFY is
  sent and no dispatcher can see the row). Both are stated beside the figures, with the median as taken
  before; the alternative's latency still runs from its request's insert. Traced one handoff at a time (200 at
  20/s, 2 dispatchers, batch receiver, a load of 13-16 from other engineers' work): the approval's statements
  2.9 ms, its COMMIT 4.8 ms, the commit returned to the claim 1.3-1.7 ms, the claim to the receiver's commit
  9.8-10.3 ms (the call 9-13 ms); of the 13.8 ms that the waiting part then showed, 12.1 were the approval's
  transaction. Between the NOTIFY and the claim a woken dispatcher makes 3 round trips: the listening thread
  hands the wake-up to the schedule, a free worker takes a delivery turn of that destination (a woken idle
  destination gets no "anything due?" probe first), reads the destination's row (now 0.1 ms of CPU, was 0.4
  ms), takes the limits' permit (one read that also answers the breaker), then claims (on PostgreSQL since
  2026-12-07 one statement that reads and claims, `handoff_claim_turn`). A handoff committed
  while both lanes of its destination (HANDOFF_DISPATCH_LANES, 2) are in a turn waits for the end of one. More
  lanes would cut that wait and cost a turn's statements for fewer handoffs each; one try of 2 against 4
  lanes at a load of 18 (17/s reached of 300 asked) measured nothing that can be believed, so the lane count
  is left for the idle run. Every commit's NOTIFY wakes each dispatcher, and the one that finds nothing pays a
  whole empty delivery turn: 0.38-0.46 ms of its CPU and 0.18-0.22 ms of its backend's (2,000 turns timed with
  `time.process_time` and `/proc/<backend>/stat`), where an "anything due?" turn costs 0.15 and 0.06 ms. A
  probe first would likely not spare it (reasoned, not measured): both woken dispatchers probe before either
  one's claim commits.
- **Backlog after an outage.** While the receiver is down the breaker pauses the destination after a few
  failed batch calls (each failed batch call spends an attempt on each of its up to 50 handoffs, which
  only moves their next try; none went to a person). The first delivery after the receiver's return
  waits for the breaker's next probe (2 s doubling up to `HANDOFF_BREAKER_PROBE_CAP`, 60 s): the
  "first delivery after" figure. The drain then runs under the limit the operator set for the destination
  (`outbox/services/limits.py`, set on the health page): calls in flight are leased slots on the database clock,
  requests per second are rate slots that are free again one second after their request's answer came
  back, and a 429 or 503 with `Retry-After` holds the whole destination. The receiver logs each call's
  arrival and answer (the `observe` option of its fault wrapper); the row reports the most calls in flight
  and the most arrivals within one second it saw, against the limit.
- **Growth.** Once delivered rows make the outbox and its indexes larger than `shared_buffers` (128 MB
  here; each fill's sizes are in its growth row above), every claim and outcome, which rewrite indexed
  columns, reads index pages back from the OS cache. Each growth figure is one 5,000-handoff run, minutes
  apart from its small-table reference, and this shared machine's load can move as much as the effect.
  Repeated with the small and the large table alternated, twice, 10,000 handoffs each
  (`bench/growth_repeat.py`, before the partial indexes): 0.77 both times at 1,000,000 rows. Since then
  the claim, lease, settlement, retrying and console-state indexes are partial on the working states
  (migration `0007_partial_indexes`) and the rarely set references (owner, acknowledgement, compensated
  step) are indexed only where set (`0008`): a delivered row leaves them when it is delivered. Every
  claim and outcome still writes an entry into each full index (primary key, action key, workspace keyset,
  source reference, source id, workflow instance), because an update of an indexed column writes a new
  row version; archiving delivered rows (or partitioning the outbox by state) is the lever after this
  one. `bench/growth_repeat.py` after both migrations, on an idle machine: 1,690/s with 10,000 delivered
  rows against 1,704/s with 1,000,000 (1.01), then 1,731/s against 1,739/s (1.00), every handoff
  delivered once. The bench waits for the end of a run by asking whether any handoff is still in a working state,
  through the partial index (a count of the delivered rows every 20 ms took 0.1-0.3 s a poll at
  1,000,000 rows, on the cores the measured run needs). The preloads are filled set-based
  (`INSERT … SELECT generate_series`, `bench/harness.py`) with the outbox's secondary indexes dropped and
  then recreated from the statements the catalog held (so the runs measure whatever indexes the
  migrations define), vacuumed, analyzed and checkpointed before the measured run starts. Each table is
  filled once, in an outbox of its own with 4 dispatchers of its own; between runs only the run's handoffs
  and their history go, then the outbox is vacuumed, analyzed and checkpointed again (`remove_run`).
- **Reconciliation.** The source is paged by keyset on the unique action-key index, the receiver through
  its `list_keys` API, 5,000 keys a page each; at most one page of the source and two of the receiver
  (over HTTP the next is asked for while one is merged) are held, which is what the RSS samples (after
  each tenth of the keys) show. The source rows carry the work status the receiver reports, as after an
  earlier run, so a run writes only changed statuses: the steady state. (Earlier reports' fill left them
  empty, so the first destination measured, `in_process`, also wrote every key's status: 19,004 keys/s at
  1,000,000, not comparable with `http`'s figure.) At 10,000,000 keys only the production destination,
  `http`, is run (over the rows of the largest growth run, one fill for both figures); `in_process`, for
  tests and the embedded demo, is measured at 1,000,000.
- **Console at 1,000,000 handoffs.** Each page paid for two things. The header's "need attention"
  figure counted every open row of the workspace on every view (8-12 ms for the fill's 63,000 open rows);
  it now stops at 1,000 per part in one query (0.6 ms) and shows "999+" past the cap
  (`needing_person_counts_bounded`). The retrying list read every row in backoff (10,000) through the full
  `(state, next_attempt_at)` index and sorted them for one page (58-437 ms); it now reads
  `handoff_retrying_idx (workspace_id, created_at, id, next_attempt_at) WHERE state = 'pending' AND
  attempts > 0` newest first (0.3 ms). The state index is partial on the states that are not delivered
  (86 MB to 5.3 MB on this fill). Query counts are pinned flat from 5 to 50 rows
  (`tests/console/test_query_counts_flat.py`). What remains of a page's time is Python: on 2026-12-05 the
  needs-attention page took about 50 ms of the web process's CPU (thread time, in-process), 17 ms building
  its context and 20 ms rendering its 50 rows. Every string a row masked re-read every configured secret
  and ran three RE2 substitutions (70 µs a client name): the secrets are now read once per request and
  each pattern runs only on a text holding its part (`whsec_`, `bearer`, `@`). Each row reversed up to
  four URLs: now one reverse() per URL name and page (`lib/row_urls.py`), and the client's name is worked
  out once per row in `handoff_rows`. Old code against new, alternated on the same 1,000,000-row fill
  (a machine at load 30-40, so CPU, not wall time): needs attention 76.8 → 59.5 ms of CPU (medians of
  20), owner=me older than 1 day 57.0 → 44.4 ms. The 95th percentile (113-139 ms against medians of
  57-66) was a full garbage collection of the whole process (150,000 objects of start-up) in one of the
  measured requests, about one in 40: `config/wsgi.py` freezes what start-up loaded (`gc.freeze()`) in
  every web process, and the bench does the same after its warm-up; it now takes 30 requests a page (the
  95th percentile of 10 was their slowest).
"""


def machine() -> str:
    cores = os.cpu_count()
    mem_kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
    model = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
    pg = subprocess.run(
        [
            "psql",
            "-h",
            os.environ.get("PGHOST", "/var/run/postgresql"),
            "-d",
            "postgres",
            "-Atc",
            "show server_version",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (
        f"{cores} cores ({model.group(1).strip() if model else 'unknown CPU'}), "
        f"{mem_kb / 1024 / 1024:.0f} GiB memory, PostgreSQL {pg}"
    )


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


GROWTH_COMMAND = ".venv/bin/python bench/growth_repeat.py"
LEVER_COMMAND = ".venv/bin/python bench/lever_single_calls.py"
NEXT_LEVERS = """\
1. **Concurrent calls per dispatcher** (`outbox/dispatch/dispatcher.py`, `deliver_claims_one_by_one`): the first
   half of this lever is built: single calls record a claim batch's outcomes in one commit after its
   calls (the split measured 0.27 -> 0.68 and 0.32 -> 0.78 of the receiver's capacity). The second half,
   for receivers far away: the calls of a batch in flight at once (a thread pool no larger than the
   destination's concurrency limit; `HttpDestination` already keeps one thread-safe pool of keep-alive
   connections), at most as many claims per batch as calls in flight so that the batch lasts one call and the
   one-call-per-lease rule holds. On this machine it added nothing over the single commit (0.55 and 0.77
   in the two splits).
2. **Delivered rows out of the outbox** (growth at 1,000,000 and 10,000,000 rows): move delivered rows past
   a retention setting to an archive table, or partition the outbox by state, so that claims and outcomes
   no longer write into full indexes sized by history. The console, reconciliation and the admin then read
   both (reconciliation's keyset merge already pages by action key).
3. **Wake one dispatcher, not all** (`outbox/dispatch/wakeups.py`): every commit's NOTIFY wakes every listening
   dispatcher, and all but one find nothing to claim (two round trips each). With more dispatchers than
   cores that costs latency (see above); a wake-up that reaches one idle dispatcher (a channel per
   dispatcher, or the woken one claiming for the others) would let a host run more of them for one-call
   throughput without paying for it in latency.
4. **Waiting for a call slot**: every request now takes a permit (deliveries, settlement lookups,
   reconciliation's key listing, a batch refused with 413 then sent one call per handoff), but a
   dispatcher refused a call slot polls every 20 ms; a NOTIFY when a slot is freed would cost less.
5. **Delivery attempted after commit in the committing process**: not worth it here (producers reached a
   third of the rate, latency doubled; at an equal 20/s, lost once and tied once). The latency that
   remains is half waiting to be claimed, half the receiver call.
6. **Fewer round trips per cycle** (latency): built. The claim is one statement, the destination's row one
   read, a batch of plain deliveries one statement that also answers the breaker: 3 round trips a healthy
   cycle, from 14 (4 once the row was read at each turn; on 2026-12-07 the row and the limits became one
   statement, `_turn_reads`). On PostgreSQL the turn's reads are now folded into its claim
   (`handoff_claim_turn`, which checks the holds, the breaker and the limits itself): 2 round trips (claim,
   outcome), as the minimal dispatcher makes, when no hold, pause or limit is set and the row is unchanged;
   otherwise, on a destination's first turn in a process and on SQLite, the old path. Outcomes
   that are not plain deliveries (a retry's backoff, a failure, a workflow's next step) keep the locked
   path, which reads the row the plan needs: six round trips, only on those batches.
   The receiver's batch is five (BEGIN, the replay record, the insert, the read-back, COMMIT); an insert
   that returns what it wrote would spare the read-back on a batch of new keys.
"""
LEVER_INLINE = " (lever: delivery attempted after commit in the committing process)"


def one_call_figure(r: dict) -> tuple[float, float, float]:
    """(handoffs/s, reference, ratio) of the one-call path, read conservatively: the median of its runs, divided
    by the most the receiver answered in any capacity measurement of the run. Every other figure against the
    receiver's capacity (the backlog, the lever) is divided by the same reference."""
    single = r["throughput_single_calls"]
    runs = single.get("pairs") or [single]
    per_second = statistics.median(run["per_second"] for run in runs)
    reference = max(
        [row["per_second"] for row in r["receiver_capacity"]]
        + [run.get("capacity", 0) for run in runs]
    )
    return per_second, reference, per_second / reference


def one_call_paired(r: dict) -> float | None:
    """The aim's figure: the median of the pairs' ratios, each one-call run divided by the receiver's capacity
    measured just before it. A pair shares the machine's load of the moment (this machine is shared, and its
    load drifts over a 15-minute run), which the run's best capacity does not. Dividing by that best capacity
    (`one_call_figure`) was the reading while the capacity swung between two levels from one measurement to
    the next (2 gunicorn workers: it depended on which worker process each keep-alive connection landed on);
    with gunicorn's recommended 2 × cores + 1 workers (`bench/harness.py`) it no longer does. Taken by
    bench/pairs.py ("paired"), loaded pairs are left out and a collapsed capacity refuses it (None)."""
    single = r["throughput_single_calls"]
    if "paired" in single:
        return single["paired"]["ratio"]
    runs = single.get("pairs") or [single]
    return statistics.median(
        run["per_second"] / run["capacity"] for run in runs if run.get("capacity")
    )


def batch_ratio(r: dict, four: dict) -> float:
    """4 dispatchers against pgbench at 4 clients: the paired figure (0 when refused), else the curve's run."""
    paired = r.get("batch_against_pgbench")
    if paired:
        return paired["ratio"] or 0.0
    return four["ratio_to_pgbench"]


def batch_cell(r: dict, four: dict) -> str:
    paired = r.get("batch_against_pgbench")
    if not paired:
        return f"{four['ratio_to_pgbench']:.2f}"
    if "paired" in four:  # the curve's row at 4 is the median pair of this same figure
        return paired["describe"]
    return f"{paired['describe']}; the scaling curve's single run {four['ratio_to_pgbench']:.2f}"


def paired_ratio(row: dict, key: str) -> str:
    """A row's ratio to its reference: the judged one of its pairs ("refused, not published: …" without a
    number when its reference collapsed or too few pairs were quiet), else the single run's."""
    if "paired" in row:  # "0.96 (median of 3 of 3 pairs, …)", or the refusal
        return row["paired"]
    return f"{row[key]:.2f}" if row.get(key) is not None else "refused, not published"


def one_call_cell(r: dict, ratio: float | None) -> str:
    paired = r["throughput_single_calls"].get("paired")
    if paired and ratio is None:
        return paired["describe"] + one_call_ceiling(r)
    judged = f"; {paired['describe']}" if paired else ""
    return f"{ratio:.2f} ({single_pairs(r)}{judged}){one_call_ceiling(r)}"


def one_call_ceiling(r: dict) -> str:
    """The machine's ceiling for one call per handoff, measured in the same run (`bench/e2e.py`
    `one_call_ceiling_pairs`): as many minimal dispatchers (`bench/reference_dispatcher.py`) as the product's,
    one call a handoff, paired run by run with the product's; the ratio is the product's rate over theirs."""
    ceiling = r.get("one_call_ceiling")
    if not ceiling or not ceiling.get("pairs"):
        return ""
    pair = median_pair(ceiling)
    reference, product = pair["reference"], pair["product"]
    return (
        f". This machine's ceiling for a dispatcher that claims from PostgreSQL and records there, in the same "
        f"run: {reference['dispatchers']} minimal dispatchers (`bench/reference_dispatcher.py`: a claim "
        f"statement, one signed call a handoff, one outcome statement a batch, nothing else) "
        f"{reference['per_second']:,.0f}/s against the product's {product['per_second']:,.0f}/s in the median "
        f"pair; the product's rate over the ceiling's {ceiling['describe']}"
    )


def single_pairs(r: dict) -> str:
    per_second, reference, ratio = one_call_figure(r)
    runs = r["throughput_single_calls"].get("pairs") or [r["throughput_single_calls"]]
    each = ", ".join(f"{run['per_second']:,.0f}/s against {run['capacity']:,.0f}/s" for run in runs)
    return (
        f"median of {len(runs)} pairs' ratios, each one-call run divided by the receiver's capacity measured just "
        f"before it: {each}. Conservatively, the median run {per_second:,.0f}/s divided by {reference:,.0f}/s, "
        f"the most the receiver answered in any capacity measurement of the run: {ratio:.2f}"
    )


def latency_runs(lat: dict) -> str:
    """Which of the latency runs stands for them (the one with the median median), and what each gave."""
    runs = lat.get("runs") or []
    if len(runs) < 2:
        return ""
    each = ", ".join(f"{run['median_ms']} ms (p99 {run['p99_ms']} ms)" for run in runs)
    return f"; the run with the median median of {len(runs)}: {each}"


def from_insert(row: dict) -> str:
    """The latency as taken until 2026-12-06, from the outbox row's insert (`bench/e2e.py` `from_commit`)."""
    if row.get("median_from_insert_ms") is None:
        return ""
    return f"; from the approval's insert, as taken before 2026-12-06: {row['median_from_insert_ms']} ms"


def approval_parts(row: dict) -> str:
    """The approval's own transaction, before the commit the latency runs from, and the figures from its insert."""
    if row.get("median_approval_commit_ms") is None:
        return ""
    return (
        f"; before the commit, the approval's statements {row['median_approval_statements_ms']} ms and its "
        f"COMMIT {row['median_approval_commit_ms']} ms; from the approval's insert, as taken before "
        f"2026-12-06: median {row['median_from_insert_ms']} ms"
    )


def share_parts(row: dict) -> str:
    """The parts of one latency run's product share, and the receiver's own part beside them (medians over
    the run's first attempts)."""
    return (
        f"waiting to be claimed {row['median_wait_to_claim_ms']} ms and claiming, signing and sending "
        f"{row['median_claim_to_arrival_ms']} ms; the receiver's own part (arrival to its commit) "
        f"{row['median_receiver_own_ms']} ms{receiver_queue(row)}"
    )


def receiver_queue(row: dict) -> str:
    """The receiver's wait for one of gunicorn's threads and its parsing, the start of its own part."""
    if row.get("median_receiver_queue_ms") is None:
        return ""
    return f", of it waiting for a thread and parsing {row['median_receiver_queue_ms']} ms"


SHARE_IS = "approval commit to the request's arrival at the receiver"


def product_share_row(lat: dict, ceiling: dict | None = None) -> str:
    """The aims row of the product's own share of the median latency (issue 40), from the latency run that
    stands for the runs at half the maximum rate (`bench/e2e.py` `from_commit`), and beside it the machine's
    ceiling measured in the same run (`ceiling`: `bench/e2e.py` `latency_pairs`); the aim is judged on the
    share alone."""
    aim = f"| the product's own share of the latency < {AIM_PRODUCT_SHARE_MS:.0f} ms at half the maximum rate | "
    if lat.get("product_share_ms") is None:
        return (
            aim
            + "not measured: the receiver did not time its calls (`bench/receiver_timing.py`) | missed |"
        )
    return (
        aim
        + f"{lat['product_share_ms']} ms of the median {lat['median_ms']} ms ({SHARE_IS}; of it "
        f"{share_parts(lat)}; medians over the handoffs, this host's clock){share_ceiling(ceiling)} | "
        f"{verdict(lat['product_share_ms'] < AIM_PRODUCT_SHARE_MS)} |"
    )


def share_ceiling(ceiling: dict | None) -> str:
    """The machine's ceiling for the share, measured in the same run: a minimal dispatcher's share at the same
    asked rate, paired with the product's (`bench/e2e.py` `latency_pairs`), and the ratio of the two shares."""
    if not ceiling or not ceiling.get("pairs"):
        return ""
    pair = median_pair(ceiling)
    reference, product = pair["reference"], pair["product"]
    return (
        f"; this machine's ceiling, a minimal dispatcher (`bench/reference_dispatcher.py`, graphile-worker's "
        f"path) at the same asked rate in the same run: its share {reference['product_share_ms']} ms (waiting "
        f"to be claimed {reference['median_wait_to_claim_ms']} ms, claiming, signing and sending "
        f"{reference['median_claim_to_arrival_ms']} ms) against the product's "
        f"{product['product_share_ms']} ms in the median pair; the ceiling's share over the product's "
        f"{ceiling['describe']}"
    )


def check_mark(row: dict) -> str:
    return (
        "every handoff delivered once: ok" if row["check"]["ok"] else f"CHECK FAILED {row['check']}"
    )


def console_pages(text: str) -> list[tuple[str, float, float]]:
    rows = []
    for line in text.splitlines():
        match = re.match(r"^(.+?)\s+([0-9.]+)\s+([0-9.]+)\s+(\d{3})$", line)
        if match:
            rows.append((match.group(1).strip(), float(match.group(2)), float(match.group(3))))
    return rows


def reconcile_samples(text: str) -> dict[str, list[tuple[int, float]]]:
    """The RSS samples `bench/reconcile_bench.py` prints per destination: [(keys compared, MB), ...]."""
    samples = {}
    for match in re.finditer(r"(\w+): RSS after (.+)", text):
        samples[match.group(1)] = [
            (int(keys.replace(",", "")), float(mb))
            for keys, mb in re.findall(r"([0-9,]+) keys ([0-9.]+) MB", match.group(2))
        ]
    return samples


def bounded(samples: list[tuple[int, float]]) -> bool:
    """Memory bounded: the RSS after the last tenth of the keys within MEMORY_SLACK of the RSS after the first."""
    return len(samples) >= 2 and samples[-1][1] <= samples[0][1] * (1 + MEMORY_SLACK)


def rss_summary(samples: list[tuple[int, float]], peak: float) -> str:
    if not samples:
        return f"peak RSS {peak:.0f} MB"
    return (
        f"RSS {samples[0][1]:.0f} MB after {samples[0][0]:,} keys, {samples[-1][1]:.0f} MB after "
        f"{samples[-1][0]:,}; peak {peak:.0f} MB"
    )


def reconcile_rates(text: str) -> dict[str, tuple[float, float]]:
    rates = {}
    for match in re.finditer(
        r"(\w+): ([0-9,]+) keys compared in [0-9.]+ s = ([0-9,]+) keys/s .*?peak RSS of the "
        r"reconciling process (\d+) MB",
        text,
    ):
        rates[match.group(1)] = (float(match.group(3).replace(",", "")), float(match.group(4)))
    return rates


def reconcile_pass_seconds(text: str) -> dict[str, tuple[int, float]]:
    """The cost of one full reconciliation pass per destination kind: (keys compared, seconds)."""
    return {
        match.group(1): (int(match.group(2).replace(",", "")), float(match.group(3)))
        for match in re.finditer(r"(\w+): ([0-9,]+) keys compared in ([0-9.]+) s =", text)
    }


def reconcile_aim_row(text: str, where: str) -> list[str]:
    """A row for each destination kind `bench/reconcile_bench.py` printed in `text`: at the aim's size the aim's
    row, keys/s and memory judged; below it the same figures beside it, the aim's size not reached."""
    rows = []
    passes = reconcile_pass_seconds(text)
    for kind, (rate, mb) in reconcile_rates(text).items():
        keys = passes[kind][0]
        samples = reconcile_samples(text).get(kind, [])
        fast, flat = rate >= AIM_RECONCILE_KEYS_PER_S, bounded(samples)
        figure = f"{rate:,.0f} keys/s; {rss_summary(samples, mb)}"
        memory = (
            f"memory {'bounded' if flat else 'grew with the keys'} (RSS at the end within "
            f"{MEMORY_SLACK:.0%} of RSS after the first tenth: {'yes' if flat else 'no'})"
        )
        if keys >= AIM_RECONCILE_KEYS:
            rows.append(
                f"| reconciliation ≥ {AIM_RECONCILE_KEYS_PER_S:,} keys/s with bounded memory at "
                f"{AIM_RECONCILE_KEYS:,} keys, {kind} ({keys:,} keys: {where}; no findings) | {figure} | "
                f"{verdict(fast and flat)}: keys/s {verdict(fast)}; {memory} |"
            )
        else:
            rows.append(
                f"| the same at {keys:,} keys, {kind} ({where}; no findings) | {figure} | {verdict(fast)} "
                f"(keys/s; {memory}; {AIM_RECONCILE_KEYS:,} keys is the aim's size) |"
            )
    return rows


def reconcile_aim_rows(text: str, big: dict | None) -> list[str]:
    """The reconciliation rows of the aims table: the section's own runs (`make bench`: the aim's 10,000,000
    keys in_process and 1,000,000 over http, on databases kept between runs), the largest growth run's when
    `bench/e2e.py --reconcile-after-growth` ran, and the cost of one pass at each kind."""
    kept = "databases kept between runs" if "kept databases" in text else "the section's own fill"
    lines = reconcile_aim_row(text, kept)
    if big:
        lines += reconcile_aim_row(big["output"], "the largest growth run's rows")
    if not any(
        line.startswith(f"| reconciliation ≥ {AIM_RECONCILE_KEYS_PER_S:,}") for line in lines
    ):
        lines.insert(
            0,
            f"| reconciliation ≥ {AIM_RECONCILE_KEYS_PER_S:,} keys/s with bounded memory at "
            f"{AIM_RECONCILE_KEYS:,} keys | not run at that size | missed |",
        )
    for kind, (n, seconds) in reconcile_pass_seconds(text).items():
        # What each scheduled run (every RECONCILIATION_EVERY_MINUTES) costs at this size; no aim was set.
        lines.append(
            f"| cost of one full reconciliation pass at {n:,} keys, {kind} (no aim; it runs every "
            f"`RECONCILIATION_EVERY_MINUTES`) | {seconds:.1f} s | reported |"
        )
    return lines


def one_call_row(pair: dict) -> str:
    """A one-call-per-handoff run beside the receiver's capacity measured just before it: how the reference's
    clients connected and, when the run noted it, how each side's connections fell on the receiver's workers
    (bench/receiver_capacity.py and the outside section say why both matter)."""
    stagger = pair.get("capacity_stagger_seconds")
    clients = f"4 plain clients {stagger:g} s apart, 5 s" if stagger else "4 plain clients, 5 s"
    placed = ""
    if pair.get("capacity_connections") or pair.get("receiver_connections"):
        reference = outside_report.placement(
            {"receiver_connections": pair.get("capacity_connections")}
        )
        placed = (
            f"; connections a receiver worker: capacity {reference}, "
            f"this run {outside_report.placement(pair)}"
        )
    return (
        f"| {pair['handoffs']:,} handoffs, 4 dispatchers, one call per handoff, right after the "
        f"receiver's capacity was measured at {pair.get('capacity', 0):,.0f} creates/s ({clients}) | "
        f"{pair['per_second']:,.0f} handoffs/s | {pair['per_second'] / pair['capacity']:.2f} of that "
        f"capacity; {check_mark(pair)}{placed} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--e2e", required=True)
    parser.add_argument("--console", required=True)
    parser.add_argument("--console-rows", type=int, required=True)
    parser.add_argument("--reconcile", required=True)
    parser.add_argument(
        "--reconcile-command", action="append", help="the section's commands, in their order"
    )
    parser.add_argument(
        "--commands", required=True, help="file with the commands this run used, one a line"
    )
    parser.add_argument("--seconds", type=int, required=True)
    parser.add_argument(
        "--section-seconds",
        help="bench/run.sh's seconds per section (var/bench/section_seconds.txt)",
    )
    parser.add_argument(
        "--levers", help="output of bench/lever_single_calls.py, when it was run (BENCH_LEVERS=1)"
    )
    parser.add_argument(
        "--growth-repeat", help="output of bench/growth_repeat.py, when it was run (BENCH_LEVERS=1)"
    )
    parser.add_argument(
        "--destinations", help="the JSON bench/destinations_bench.py wrote, when it was run"
    )
    parser.add_argument("--tracing", help="the JSON bench/tracing_bench.py wrote, when it was run")
    parser.add_argument("--outside", help="the JSON bench/outside_check.py wrote, when it was run")
    parser.add_argument("--outside-command", default="", help="the command that ran it")
    parser.add_argument("--oauth2", help="the JSON bench/oauth2_bench.py wrote, when it was run")
    parser.add_argument(
        "--status-events", help="the JSON bench/status_events_bench.py wrote, when it was run"
    )
    parser.add_argument(
        "--many-destinations",
        help="the JSON bench/many_destinations_bench.py wrote, when it was run",
    )
    parser.add_argument(
        "--console-operators",
        help="the JSON bench/console_operators_bench.py wrote, when it was run",
    )
    parser.add_argument(
        "--console-operators-command", default="", help="the command that ran it, as run.sh ran it"
    )
    parser.add_argument(
        "--retention", help="the JSON bench/retention_bench.py wrote, when it was run"
    )
    parser.add_argument("--retention-command", default="", help="the command that ran it")
    parser.add_argument(
        "--settlement", help="the JSON bench/settlement_bench.py wrote, when it was run"
    )
    parser.add_argument("--settlement-command", default="", help="the command that ran it")
    parser.add_argument("--search", help="the JSON bench/search_bench.py wrote, when it was run")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    r = json.loads(Path(args.e2e).read_text())
    pg = {int(k): v for k, v in r["pgbench_tps"].items()}
    by_count = {row["dispatchers"]: row for row in r["throughput"]}
    best = max(r["throughput"], key=lambda row: row["per_second"])
    alt = r["alternative"]
    times_alt = best["per_second"] / alt["per_second"]
    capacity_rows = r["receiver_capacity"]
    single = r["throughput_single_calls"]
    # The most the receiver answered: every ratio to its capacity uses it.
    _one_call_rate, reference, _conservative = one_call_figure(r)
    one_call_ratio = one_call_paired(r)
    concurrent = r.get("throughput_concurrent_single_calls")
    lat = r["latency"]
    backlog = r["backlog"]
    growth = r["growth"]
    console_text = Path(args.console).read_text().strip()
    pages = console_pages(console_text)
    reconcile_text = Path(args.reconcile).read_text().strip()
    minutes = f"{args.seconds // 60} min {args.seconds % 60} s"

    lines = [
        "# Benchmarks",
        "",
        f"Measured {datetime.date.today().isoformat()} on {machine()}, by `make bench` ({minutes}). Everything "
        "ran on this one machine: PostgreSQL, the receiver under gunicorn "
        f"({r.get('receiver_workers', 2)} workers of {r.get('receiver_threads', 8)} threads), the "
        "dispatchers and the load generators share its cores, and other work on the machine adds noise. That is "
        "why every figure is divided by a reference measured in the same run: pgbench `-N` at the same client "
        "count, the receiver's own capacity (signed creates/s from plain clients), or the small-table figure.",
        "",
        f"Load average (1, 5, 15 min) at the start of the run {os.environ.get('BENCH_LOAD_AT_START', '?')}, "
        f"at its end {' '.join(f'{x:.2f}' for x in os.getloadavg())}, on {os.cpu_count()} cores.",
        "",
        "Commands (all started by `make bench`, which runs `bench/run.sh`; databases are named "
        "`<prefix>_*`, the prefix from `BENCH_DB_PREFIX`, default `bench`):",
        "",
        "```sh",
        Path(args.commands).read_text().strip(),
        *(
            [
                "# run by bench/e2e.py right after its "
                f"{r['reconcile_after_growth']['preloaded_rows']:,}-row growth run, "
                "over the same outbox:",
                r["reconcile_after_growth"]["command"],
            ]
            if r.get("reconcile_after_growth")
            else []
        ),
        "```",
        "",
        "After every delivered run the bench checks that every handoff is `delivered`, that the receiver holds "
        "exactly one task per action key and as many tasks as handoffs, and that each handoff's stored task id "
        'is the receiver\'s ("every handoff delivered once" below); for a growth run, whose preloaded rows have no '
        "task at its receiver, the same for the run's own handoffs, with every preloaded row still `delivered`.",
        "",
        *method_lines(),
        *budget_lines(args.section_seconds),
        "## Aims",
        "",
        "| aim | measured | |",
        "| --- | --- | --- |",
    ]
    four = by_count.get(4)
    lines.append(
        f"| ≥ {AIM_RATIO_TO_PGBENCH} of pgbench `-N` at 4 dispatchers (batch API) | "
        f"{batch_cell(r, four)} | {verdict(batch_ratio(r, four) >= AIM_RATIO_TO_PGBENCH)} |"
    )
    lines.append(
        f"| ≥ {AIM_TIMES_ALTERNATIVE:.0f}× the `on_commit` + django-q2 alternative | {times_alt:.1f}× | "
        f"{verdict(times_alt >= AIM_TIMES_ALTERNATIVE)} |"
    )
    lines.append(
        f"| median commit-to-receiver latency < {AIM_MEDIAN_LATENCY_MS:.0f} ms at half the maximum rate | "
        f"{lat['median_ms']} ms at {lat['achieved_rate']:,.0f}/s ({lat['dispatchers']} dispatchers"
        f"{', one per core' if lat['dispatchers'] == os.cpu_count() else ''}{latency_runs(lat)}"
        f"{from_insert(lat)}) | {verdict(lat['median_ms'] < AIM_MEDIAN_LATENCY_MS)} |"
    )
    lines.append(
        f"| p99 commit-to-receiver latency < {AIM_P99_LATENCY_MS:.0f} ms at half the maximum rate | "
        f"{lat['p99_ms']} ms | {verdict(lat['p99_ms'] < AIM_P99_LATENCY_MS)} |"
    )
    lines.append(product_share_row(lat, r.get("latency_ceiling")))
    lines.append(
        f"| one call per handoff ≥ {AIM_RATIO_TO_RECEIVER} of the receiver's capacity | "
        f"{one_call_cell(r, one_call_ratio)} | "
        f"{verdict(one_call_ratio is not None and one_call_ratio >= AIM_RATIO_TO_RECEIVER)} |"
    )
    if r.get("latency_inline"):
        inl = r["latency_inline"]
        lines.append(
            f"| (lever) the same latency with delivery attempted after commit by the committing process | "
            f"median {inl['median_ms']} ms, p99 {inl['p99_ms']} ms at {inl['achieved_rate']:,.0f}/s | "
            f"{verdict(inl['median_ms'] < AIM_MEDIAN_LATENCY_MS and inl['p99_ms'] < AIM_P99_LATENCY_MS)} "
            "(not the product path yet) |"
        )
    if concurrent:
        lines.append(
            f"| (lever) one call per handoff, a claim batch's calls in flight at once | "
            f"{(concurrent['per_second'] / reference):.2f} | "
            f"{verdict((concurrent['per_second'] / reference) >= AIM_RATIO_TO_RECEIVER)} "
            "(not the product path yet) |"
        )
    lines.append(
        f"| backlog after an outage: nothing handed to a person | {backlog['needs_attention']} in "
        f"`needs_attention` | {verdict(backlog['needs_attention'] == 0 and backlog['check']['ok'])} |"
    )
    limit, seen = backlog["limit"], backlog["observed"]
    backlog_met = (
        (backlog["per_second"] / reference) >= AIM_BACKLOG_TO_RECEIVER
        and backlog["limit_held"]
        and backlog["check"]["ok"]
    )
    lines.append(
        f"| backlog drained at ≥ {AIM_BACKLOG_TO_RECEIVER} of the receiver's capacity, under an "
        f"operator-set per-destination limit | {(backlog['per_second'] / reference):.2f} under "
        f"{limit['max_concurrency']} calls in flight and {limit['max_requests_per_second']} requests/s; the "
        f"receiver saw at most {seen['max_in_flight']} in flight and {seen['max_requests_in_one_second']} "
        f"within one second | {verdict(backlog_met)} |"
    )
    same_size = four["per_second"] if four and four["handoffs"] == growth[0]["handoffs"] else None
    for row in growth[1:]:
        noisy = same_size is not None and growth[0]["per_second"] < 0.8 * same_size
        caveat = (
            f", but not conclusive: the small-table reference ({growth[0]['per_second']:,.0f}/s) is "
            f"{growth[0]['per_second'] / same_size:.2f} of the same-size 4-dispatcher run earlier in this run "
            f"({same_size:,.0f}/s), so the machine's load moved more than the effect"
            if noisy
            else ""
        )
        lines.append(
            f"| ≥ {AIM_GROWTH_RATIO} of the small-table figure with {row['preloaded_rows']:,} delivered "
            f"rows | {paired_ratio(row, 'ratio_to_small_table')}: {row['per_second']:,.0f}/s against "
            f"{growth[0]['per_second']:,.0f}/s with {growth[0]['preloaded_rows']:,} rows, same run | "
            f"{verdict((row['ratio_to_small_table'] or 0) >= AIM_GROWTH_RATIO)}{caveat} |"
        )
    if args.growth_repeat:
        text = Path(args.growth_repeat).read_text()
        found = re.findall(r"ratio ([0-9.]+)([^\n]*)", text)
        pairs = [
            ratio + (" (left out: loaded)" if "left out" in rest else "") for ratio, rest in found
        ]
        kept = [float(ratio) for ratio, rest in found if "left out" not in rest]
        judged = re.search(r"^judged: (.+)$", text, re.M)
        refused = bool(judged) and judged.group(1).startswith("refused")
        lines.append(
            f"| the same, repeated: small and large table alternated, {len(pairs)} pairs of 10,000 handoffs "
            f"(`{GROWTH_COMMAND}`) | {', '.join(pairs)}{'; ' + judged.group(1) if judged else ''} | "
            f"{verdict(bool(kept) and not refused and min(kept) >= AIM_GROWTH_RATIO)} |"
        )
    if pages:
        worst_median = max(pages, key=lambda p: p[1])
        worst_p95 = max(pages, key=lambda p: p[2])
        ok = worst_median[1] < AIM_CONSOLE_MEDIAN_MS and worst_p95[2] < AIM_CONSOLE_P95_MS
        lines.append(
            f"| console at {args.console_rows:,} handoffs: every page median < "
            f"{AIM_CONSOLE_MEDIAN_MS:.0f} ms, p95 < {AIM_CONSOLE_P95_MS:.0f} ms | worst median "
            f"{worst_median[1]} ms ({worst_median[0]}), worst p95 {worst_p95[2]} ms ({worst_p95[0]}) | "
            f"{verdict(ok)} |"
        )
    big = r.get("reconcile_after_growth")
    lines += reconcile_aim_rows(reconcile_text, big)
    dest = json.loads(Path(args.destinations).read_text()) if args.destinations else None
    many = json.loads(Path(args.many_destinations).read_text()) if args.many_destinations else None
    tracing = json.loads(Path(args.tracing).read_text()) if args.tracing else None
    outside = json.loads(Path(args.outside).read_text()) if args.outside else None
    oauth2 = json.loads(Path(args.oauth2).read_text()) if args.oauth2 else None
    searches = (
        [json.loads(Path(args.search).read_text())]
        if args.search and Path(args.search).exists()
        else []
    )
    events = json.loads(Path(args.status_events).read_text()) if args.status_events else None
    operators = (
        json.loads(Path(args.console_operators).read_text()) if args.console_operators else None
    )
    if operators:
        lines.append(console_operators_report.aims_row(operators))
    retention = json.loads(Path(args.retention).read_text()) if args.retention else None
    if retention:
        lines.append(retention_report.aims_row(retention))
    settlement = json.loads(Path(args.settlement).read_text()) if args.settlement else None
    if settlement:
        lines.append(settlement_report.aims_row(settlement))
    if dest:
        lines.append(
            f"| a healthy destination beside one down and one slow (one dispatcher) ≥ {AIM_DESTINATIONS_RATIO} "
            f"of its rate alone | {paired_figure(dest, 'ratio')} | "
            f"{verdict(dest['met'])} |"
        )
    if many:
        lines.append(
            f"| {many['destinations']} destinations with the traffic spread over them ≥ {many['aim']} of the "
            f"one-destination rate | {paired_figure(many, 'ratio')} | "
            f"{verdict(many['met'])} |"
        )
    if outside:
        lines.append(outside_report.aims_row(outside))
    if tracing:
        lines.append(
            f"| throughput with tracing on ≥ {tracing['aim']} of off"
            f"{' (handoffs per CPU-second of the delivery path)' if 'paced_ratios' in tracing else ''} | "
            f"{paired_figure(tracing, 'median_ratio')} | {verdict(tracing['met'])} |"
        )
    if oauth2:
        lines.append(
            f"| one call through a mapped destination with OAuth2 ≥ {oauth2['aim']} of the unmapped "
            f"rate (static bearer) | {paired_figure(oauth2, 'mapped_ratio_median')} | "
            f"{verdict(oauth2['met'])} |"
        )
    lines += [search_report.aims_row(search) for search in searches]
    lines += [
        "",
        "Sizes: the issue asks for growth at 1,000,000 and 10,000,000 delivered rows, the console at 1,000,000 "
        "handoffs, reconciliation at 10,000,000 keys and a 100,000-handoff backlog. This run: growth at "
        + ", ".join(f"{row['preloaded_rows']:,}" for row in growth)
        + " delivered rows (the first the small-table reference); reconciliation at "
        + (
            f"{big['keys']:,} keys through `http` (the rows of the {big['preloaded_rows']:,}-row growth run and "
            f"its {big['handoffs']:,} handoffs, one fill for both figures) and "
            if big
            else ""
        )
        + " and ".join(
            f"{keys:,} through `{kind}`"
            for kind, (keys, _) in reconcile_pass_seconds(reconcile_text).items()
        )
        + f"; console at {args.console_rows:,}; backlog "
        f"{backlog['handoffs']:,}."
        + (
            f" The largest fill ({big['preloaded_rows']:,} delivered rows, and the matching receiver tasks in their "
            f"own database alongside) took {big['fill_seconds']:.0f} s."
            if big
            else ""
        ),
        "",
        "## Dispatcher, end to end over HTTP",
        "",
        "| figure | value | reference (same run) |",
        "| --- | --- | --- |",
    ]
    for row in capacity_rows:
        # Since 2026-12-07 the clients connect a stagger apart, as the dispatchers' first calls of a run come
        # (bench/receiver_capacity.py): their connections fall on the receiver's workers as the dispatchers' do.
        apart = (
            f", connecting {row['stagger_seconds']:g} s apart" if row.get("stagger_seconds") else ""
        )
        lines.append(
            f"| the receiver's own capacity: signed single creates from {row['clients']} plain clients "
            f"(own processes, keep-alive, no outbox{apart}) | {row['per_second']:,.0f} creates/s | "
            "measured at the start of the run |"
        )
    for clients in sorted(pg):
        lines.append(
            f"| pgbench `-N` (simple update), {clients} client(s) | {pg[clients]:,.0f} commits/s | "
            "ceiling of this PostgreSQL |"
        )
    for row in r["throughput"]:
        lines.append(
            f"| {row['handoffs']:,} handoffs created up front, {row['dispatchers']} dispatcher(s), batch API "
            f"| {row['per_second']:,.0f} handoffs/s | {paired_ratio(row, 'ratio_to_pgbench')} of pgbench at "
            f"{row['dispatchers']} client(s); {check_mark(row)} |"
        )
    lines += [one_call_row(pair) for pair in single.get("pairs") or [single]]
    concurrent = r.get("throughput_concurrent_single_calls")
    if concurrent:
        lines.append(
            f"| lever, not the product path (`bench/concurrent_dispatch.py`): {concurrent['handoffs']:,} "
            "handoffs, 4 dispatchers, one call per handoff with every call of a claim batch (20) in "
            f"flight at once and one outcome commit per batch | {concurrent['per_second']:,.0f} "
            f"handoffs/s | {(concurrent['per_second'] / reference):.2f} of the receiver's capacity; "
            f"{check_mark(concurrent)} |"
        )
    for row in (
        *(lat.get("runs") or [lat]),
        r.get("latency_best_count"),
        r.get("latency_inline"),
        r.get("latency_low_rate"),
    ):
        if not row:
            continue
        breakdown = (
            f"; of which waiting to be claimed {row['median_wait_to_claim_ms']} ms, receiver call "
            f"{row['median_receiver_call_ms']} ms (medians)"
        )
        if row.get("product_share_ms") is not None:
            breakdown = (
                f"; the product's share {row['product_share_ms']} ms ({SHARE_IS}), of it {share_parts(row)}; "
                "the receiver's commit to the outcome recorded "
                f"{row['median_receiver_commit_to_recorded_ms']} ms; the receiver call as the dispatcher "
                f"timed it {row['median_receiver_call_ms']} ms (medians){approval_parts(row)}"
            )
        lines.append(
            f"| approval commit to receiver commit, approvals at {row['achieved_rate']:,.0f}/s "
            f"(asked {row['rate']:,.0f}/s from {row.get('producers', 1)} producer process(es)), "
            f"{row['handoffs']:,} handoffs, {row['dispatchers']} dispatchers, batch API"
            f"{LEVER_INLINE if row.get('inline_attempt') else ''}"
            f" | median "
            f"{row['median_ms']} ms, p99 {row['p99_ms']} ms{breakdown} | wake-up: {row['wake_up']} |"
        )
    alat = r["alternative_latency"]
    lines.append(
        f"| the alternative: `on_commit(async_task(deliver, id))`, django-q2, 4 workers, no outbox, "
        f"{alt['handoffs']:,} handoffs | {alt['per_second']:,.0f} handoffs/s | ours (best batched) is "
        f"{times_alt:.1f}× |"
    )
    lines.append(
        f"| the alternative's latency at {alat['rate']:,.0f}/s | median {alat['median_ms']} ms, "
        f"p99 {alat['p99_ms']} ms | its ORM broker polls every 0.2 s |"
    )
    ours, theirs = r["crash"]["outbox"], r["crash"]["on_commit_django_q2"]
    lines.append(
        f"| every worker killed with SIGKILL a third of the way through, restarted: ours | "
        f"{ours['approved']:,} approved, {ours['receiver_tasks']:,} tasks: {ours['lost']} lost, "
        f"{ours['duplicated']} duplicated; complete {ours['seconds_to_complete_after_restart']} s after "
        f"restart | {ours['in_flight_at_kill']} were in flight: leases expired, settled by lookup |"
    )
    lines.append(
        f"| the same kill: the alternative | {theirs['approved']:,} approved, "
        f"{theirs['receiver_tasks']:,} tasks: {theirs['lost']} not delivered when the queue went quiet, "
        f"{theirs['duplicated']} duplicated | tasks the killed cluster had taken are re-delivered only "
        "after django-q2's retry timeout (120 s) |"
    )
    for row in growth:
        sizes = row.get("outbox_sizes")
        filled = (
            f" (table {sizes['table_mb']:,} MB, indexes {sizes['indexes_mb']:,} MB; filled in "
            f"{row['fill_seconds']:.0f} s)"
            if sizes
            else ""
        )
        lines.append(
            f"| {row['handoffs']:,} handoffs with {row['preloaded_rows']:,} delivered rows already in the "
            f"outbox{filled}, 4 dispatchers, batch API | {row['per_second']:,.0f} handoffs/s | "
            f"{paired_ratio(row, 'ratio_to_small_table')} of the small-table figure "
            f"({growth[0]['per_second']:,.0f}/s); {check_mark(row)} |"
        )
    lines.append(
        f"| backlog: {backlog['handoffs']:,} handoffs queued while the receiver was down for "
        f"{backlog['outage_seconds']:.0f} s ({backlog['attempts_during_outage']} attempts spent before the breaker "
        f"paused the destination), 4 dispatchers, batch API, limited by the operator to "
        f"{limit['max_concurrency']} calls in flight and {limit['max_requests_per_second']} requests/s (a batch call "
        f"is one request) | drained {backlog['seconds_to_drain']} s after the "
        f"receiver came back (first delivery after {backlog['seconds_to_first_delivery']} s: the breaker's next "
        f"probe), {backlog['per_second']:,.0f} handoffs/s; {backlog['needs_attention']} handed to a person; peak "
        f"RSS {backlog['peak_rss_mb']} MB per dispatcher | {(backlog['per_second'] / reference):.2f} of the "
        f"receiver's single-call capacity (the batch API carries 50 per call); the receiver saw "
        f"{seen['calls']:,} create calls, at most {seen['max_in_flight']} in flight and "
        f"{seen['max_requests_in_one_second']} within one second: the limit "
        f"{'held' if backlog['limit_held'] else 'was exceeded'}; {check_mark(backlog)} |"
    )
    lines += [
        "",
        "## Scaling curve, 1 to 8 dispatcher processes on one machine",
        "",
        "| dispatchers | handoffs/s (batch API) | pgbench `-N` commits/s, same clients | ratio | vs 1 dispatcher |",
        "| --- | --- | --- | --- | --- |",
    ]
    one = by_count[min(by_count)]["per_second"]
    for count, row in sorted(by_count.items()):
        lines.append(
            f"| {count} | {row['per_second']:,.0f} | {pg[count]:,.0f} | {paired_ratio(row, 'ratio_to_pgbench')} | "
            f"{row['per_second'] / one:.2f}× |"
        )
    lines += [
        "",
        "Two cores carry PostgreSQL, the receiver, the dispatchers and the load generator: past two processes "
        "the curve measures time-sharing, not the design. See `docs/scaling.md` for what changes on more machines.",
        "",
        "## Where the time goes",
        "",
        WHERE_TIME_GOES,
        "## Next levers (changes outside the files the bench owns)",
        "",
        NEXT_LEVERS,
        *(
            [
                f"Measured by `{LEVER_COMMAND}` (`BENCH_LEVERS=1 make bench` runs it too) in the same session, \
right after `make bench`, against its own receiver and databases:",
                "",
                "```",
                Path(args.levers).read_text().strip().split("\n{")[0],
                "```",
                "",
            ]
            if args.levers
            else []
        ),
        f"## Console pages ({args.console_rows:,} handoffs, server time through the full middleware stack)",
        "",
        "```",
        console_text,
        "```",
        "",
        "## Reconciliation",
        "",
        *(
            [
                f"{big['keys']:,} keys: the rows of the {big['preloaded_rows']:,}-row growth run and its "
                f"{big['handoffs']:,} delivered handoffs, with a matching receiver task for each preloaded row filled "
                "alongside the preload; run by `bench/e2e.py` right after that growth run as:",
                "",
                "```sh",
                big["command"],
                "```",
                "",
                "```",
                big["output"],
                "```",
                "",
            ]
            if big
            else []
        ),
        "Handoffs and their receiver tasks, reconciled by "
        + ", then ".join(
            f"`{command}`" for command in args.reconcile_command or ["bench/reconcile_bench.py"]
        )
        + " (with `--keep` on databases kept filled between runs, reused while the fill, the packages and the "
        "migration files applied to them are the ones a fresh fill would use and they hold its rows, "
        "`bench/kept.py`; `make bench-reconcile-10m` fills the 10,000,000 keys ahead of a run):",
        "",
        "```",
        reconcile_text,
        "```",
        "",
        *(destinations_section(dest) if dest else []),
        *(many_destinations_section(many) if many else []),
        *(outside_report.section(outside, args.outside_command) if outside else []),
        *(tracing_section(tracing) if tracing else []),
        *(oauth2_section(oauth2) if oauth2 else []),
        *(status_events_section(events) if events else []),
        *(
            console_operators_report.section(operators, args.console_operators_command)
            if operators
            else []
        ),
        *(retention_report.section(retention, args.retention_command) if retention else []),
        *(settlement_report.section(settlement, args.settlement_command) if settlement else []),
        *(line for search in searches for line in search_report.section(search)),
    ]
    Path(args.output).write_text("\n".join(lines))


def spread(values: list[int]) -> str:
    return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"


def destinations_section(dest: dict) -> list[str]:
    """Destinations: one down, one slow (bench/destinations_bench.py)."""
    cpu = dest["cpu_ms_per_handoff"]
    failed = [pair["with_others"]["down_failed_calls"] for pair in dest["pairs"]]
    slow = [pair["with_others"]["slow_in_flight"] for pair in dest["pairs"]]
    return [
        "## Destinations: one down, one slow",
        "",
        f'Three destinations served by one `manage.py dispatch` process: the receiver ("healthy", one call '
        'per handoff), a port nothing listens on ("down": connection refused) and a server that waits '
        f'{dest["slow_seconds"]:.0f} s before it passes each call on to the receiver ("slow"). Each pair is two '
        "runs back to back, the order alternated: "
        f"{dest['handoffs']:,} handoffs to the healthy destination alone (the others disabled), and the same "
        f"{dest['handoffs']:,} committed while {dest['others_each']} handoffs wait for each of the others, the "
        "slow one in a call and the down one failed. Rate: the healthy handoffs over the span from their first "
        "to their last delivery.",
        "",
        "```sh",
        dest["command"],
        "```",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| healthy alone (median of the runs) | {dest['alone_per_second']:,.0f} handoffs/s |",
        f"| healthy beside down and slow (median of the runs) | {dest['with_others_per_second']:,.0f} "
        "handoffs/s |",
        f"| ratio, median of the pairs' ratios (each pair's: {', '.join(map(pair_ratio, dest['pairs']))}) "
        f"| {paired_figure(dest, 'ratio')}: aim ≥ {AIM_DESTINATIONS_RATIO}, {verdict(dest['met'])}"
        f"{'' if dest['all_delivered_once'] else ' (a healthy handoff was not delivered exactly once)'} |",
        f"| the dispatcher's CPU per healthy handoff, alone / beside the others (medians) | "
        f"{cpu['alone']:.2f} ms / {cpu['with_others']:.2f} ms |",
        f"| the others meanwhile, in each run beside them | down: {spread(failed)} failed calls (its "
        f"breaker paused it); slow: {spread(slow)} claims held in its calls |",
        "",
    ]


def many_destinations_section(many: dict) -> list[str]:
    """Many destinations against one (bench/many_destinations_bench.py)."""
    cpu, conns = many["cpu_ms_per_handoff"], many["connections"]
    return [
        f"## Many destinations: {many['destinations']} against one",
        "",
        f"{many['destinations']} destinations of the http kind, all pointing at the receiver, served by one "
        "`manage.py dispatch` process (its pool of workers: one per destination, at most "
        "HANDOFF_DISPATCH_WORKERS, 8 by default). Each pair is two runs back to back, the order alternated: "
        f"{many['handoffs']:,} handoffs to one destination (the others disabled), and the same number spread "
        f"evenly over all {many['destinations']}. Rate: the handoffs over the span from their first to their "
        "last delivery. With many destinations more workers call at once, so the ratio may exceed 1.",
        "",
        "```sh",
        many["command"],
        "```",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| one destination (median of the runs) | {many['one_per_second']:,.0f} handoffs/s |",
        f"| {many['destinations']} destinations (median of the runs) | {many['many_per_second']:,.0f} "
        "handoffs/s |",
        f"| ratio, median of the pairs' ratios (each pair's: {', '.join(map(pair_ratio, many['pairs']))}) "
        f"| {paired_figure(many, 'ratio')}: aim ≥ {many['aim']}, {verdict(many['met'])}"
        f"{'' if many['all_delivered_once'] else ' (a handoff was not delivered exactly once)'} |",
        f"| the dispatcher's CPU per handoff, one / many (medians) | {cpu['one']:.2f} ms / "
        f"{cpu['many']:.2f} ms |",
        f"| the dispatcher's database connections, one / many (most in a run) | {conns['one']} / "
        f"{conns['many']} |",
        "",
    ]


def paired_figure(data: dict, ratio_key: str) -> str:
    """A ratio taken by bench/pairs.py says how it was judged (and "refused" instead of a number when its
    reference collapsed); a section's JSON from before it only has its median."""
    if "describe" in data:
        return data["describe"]
    counted = data.get("pairs") or data.get("rounds") or []
    return f"{data[ratio_key]:.2f} (median of {len(counted)} pairs)"


def pair_ratio(pair: dict) -> str:
    return f"{pair['ratio']:.2f}{pair_marks(pair)}"


def tracing_section(tracing: dict) -> list[str]:
    """Tracing on against off (bench/tracing_bench.py)."""
    ratios = ", ".join(pair_ratio(p) for p in tracing["pairs"])
    lines = [
        "## Tracing: throughput with OpenTelemetry on against off",
        "",
        "One `manage.py dispatch` process delivers the same number of handoffs to the receiver with tracing off "
        "(no OTLP endpoint: no SDK set up) and on (an OTLP/HTTP collector of the bench's own receiving every "
        "span), pairs back to back in alternating order.",
    ]
    if "paced_ratios" in tracing:
        lines += [
            "",
            "What is compared is the CPU a delivered handoff takes: handoffs per CPU-second (from `/proc`) of the "
            "dispatcher, the receiver's gunicorn and its workers, and PostgreSQL's backends on the bench's "
            "databases, the collector left out (it stands in for one on another machine). On 2 cores the "
            "delivery path at its best rate is bound by that CPU, so its ratio is the throughput tracing leaves. "
            "The rate of the one dispatcher, paced by the receiver's answers, moved by a fifth between pairs of "
            "9 s on a quiet machine (0.88 in one whole run, 1.11 in the next): three such pairs cannot tell 0.95 "
            "from 1, so it is shown beside, not judged. The CPU figure moved too (0.81-0.93 in the three pairs "
            "of 2,000 handoffs of 2026-12-06 19:43): tracing added 0.30-0.42 ms a handoff to the dispatcher in "
            "each, while the receiver's and the backends' CPU, the same work both ways, moved by up to 0.5 ms "
            "a handoff between the two runs of a pair. So the section takes 5 shorter pairs (800 handoffs a run) "
            "in the time of 3 long ones, a pair whose outside CPU was above the share is left out as everywhere, "
            "and the dispatcher's CPU a handoff, where tracing's cost is, is shown beside each pair.",
        ]
    lines += [
        "",
        "```sh",
        tracing["command"],
        "```",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| on / off, median of the pairs' ratios (each pair's: {ratios}) | "
        f"{paired_figure(tracing, 'median_ratio')}: aim ≥ {tracing['aim']}, {verdict(tracing['met'])} |",
    ]
    if "paced_ratios" in tracing:
        cpu = "; ".join(
            f"{p['off']['cpu_ms_per_handoff']:.2f} / {p['on']['cpu_ms_per_handoff']:.2f} "
            f"(dispatcher {p['off']['dispatcher_cpu_ms_per_handoff']:.2f} / "
            f"{p['on']['dispatcher_cpu_ms_per_handoff']:.2f})"
            for p in tracing["pairs"]
        )
        paced = ", ".join(f"{ratio:.2f}" for ratio in tracing["paced_ratios"])
        lines += [
            f"| CPU ms a handoff, off / on, each pair | {cpu} |",
            f"| the paced rate on / off (not judged), each pair: {paced} | median "
            f"{tracing['paced_median_ratio']:.2f} |",
        ]
    lines += [f"| spans exported per handoff | {tracing['spans_exported_per_handoff']} |", ""]
    return lines


def oauth2_section(oauth2: dict) -> list[str]:
    """OAuth2 client credentials, unmapped and mapped, against a static bearer token (bench/oauth2_bench.py)."""
    rounds = oauth2["rounds"]
    ratios = ", ".join(f"{r['ratio']:.2f}" for r in rounds)
    mapped = ", ".join(f"{r['mapped_ratio']:.2f}" for r in rounds)
    rates = "; ".join(
        f"{r['bearer_per_s']:.0f} / {r['oauth2_per_s']:.0f} / {r['mapped_oauth2_per_s']:.0f}"
        for r in rounds
    )
    load = oauth2["load_average_before"], oauth2["load_average_after"]
    return [
        "## Credentials: OAuth2 client credentials against a static bearer token",
        "",
        "The idempotency_key_http kind's one call (`deliver()`: credentials, request, receipt), "
        f"{oauth2['calls_per_run']} calls a run, each a new key, to the tests' API in a process of its own, "
        "which checks every bearer token's signature and expiry. Three sides: a static bearer token read "
        "from its variable at each call (a rotated token is used at once), the unmapped reference; OAuth2 "
        "client credentials, the token from the tests' token server once a run (then cached); and OAuth2 "
        "through a request mapping (body, a header, a query parameter; rendered before the timing, as "
        "approval freezes it). Rounds of the three back to back, the order rotating; the load the other "
        "work on this machine made is recorded with them. No dispatcher and no database: the ratios are "
        "the credentials' and the mapping's.",
        "",
        "```sh",
        oauth2["command"],
        "```",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| mapped OAuth2 / unmapped bearer, median of the rounds' ratios (each round's: {mapped}) | "
        f"{paired_figure(oauth2, 'mapped_ratio_median')}: aim ≥ {oauth2['aim']}, {verdict(oauth2['met'])} |",
        f"| OAuth2 / bearer, both unmapped, median (each round's: {ratios}) | "
        f"{oauth2['ratio_median']:.2f} |",
        f"| calls per second, bearer / OAuth2 / mapped OAuth2, each round | {rates} |",
        "| tokens fetched per OAuth2 run | 1 (two OAuth2 runs a round: "
        + spread([r["tokens_fetched"] for r in rounds])
        + " a round) |",
        f"| load average (1, 5, 15 min) before / after, {oauth2['cpus']} CPUs | "
        f"{', '.join(map(str, load[0]))} / {', '.join(map(str, load[1]))} |",
        "",
    ]


def status_events_section(events: dict) -> list[str]:
    """A receiver's status change to the source's record (bench/status_events_bench.py)."""
    return [
        "## Status events: a receiver's change to the source's record",
        "",
        f"{events['changes']} task status changes through the receiver's signed API at "
        f"{events['rate_per_second']:g}/s, the whole product under gunicorn; a change's time is the event's "
        "`occurred_at` (the receiver's clock), its record the source's `received_at` (the database's clock), "
        "both of this one machine. No aim was set; the requester's screen follows within 10 s in the browser "
        "test.",
        "",
        "```sh",
        ".venv/bin/python bench/status_events_bench.py --json var/bench/status_events.json",
        "```",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| events applied | {events['applied']} of {events['changes']} |",
        f"| change to the source's record, median / p99 / max | {events['median_ms']:.1f} ms / "
        f"{events['p99_ms']:.1f} ms / {events['max_ms']:.1f} ms |",
        "",
    ]


if __name__ == "__main__":
    main()
