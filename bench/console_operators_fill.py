"""The outbox of bench/console_operators_bench.py: a year of handoffs in the mix of a product in use, filled
in SQL (INSERT … SELECT over generate_series, through `harness.bulk_fill`), fast enough for 10,000,000 rows in
`make bench`."""

from bench.harness import Bench, bulk_fill, dsn

# A year of handoffs (created one every `spacing` seconds back from now) in the mix of a product in use: most
# delivered; every year-old row either delivered or left in a final state by a person (0.5% cancelled, 0.3%
# superseded) or still needing attention (0.2%, half of them acknowledged, owned by operator 0); pending
# (1.5%, half of those retrying in a day's backoff: still retrying when a kept fill is reused) and uncertain
# (0.5%) only among the last two days' rows. Four workspaces (7: 50%, 8: 25%, 9: 15%, 10: 10%), three
# destinations (receiver 70%, crm 20%, accounts 10%).
# Only integers are formatted in; %% is a literal %.
MIX_SQL = """
SELECT n, created,
    CASE WHEN h %% 20 < 10 THEN 7 WHEN h %% 20 < 15 THEN 8 WHEN h %% 20 < 18 THEN 9 ELSE 10 END AS ws,
    CASE WHEN n * 31 %% 10 < 7 THEN 'receiver' WHEN n * 31 %% 10 < 9 THEN 'crm' ELSE 'accounts' END AS dest,
    CASE WHEN n %% 1000 >= 997 THEN 'superseded' WHEN n %% 1000 >= 992 THEN 'cancelled'
         WHEN n %% 1000 >= 990 THEN 'needs_attention'
         WHEN created > now() - interval '2 days' AND n %% 1000 < 15 THEN 'pending'
         WHEN created > now() - interval '2 days' AND n %% 1000 < 20 THEN 'uncertain'
         ELSE 'delivered' END AS st
FROM (
    SELECT n, (n::bigint * 7919) %% 1000003 AS h, now() - (n * interval '%(spacing_ms)s milliseconds') AS created
    FROM generate_series(1, %(rows)s) AS n
) AS g
"""

HANDOFFS_SQL = (
    """
INSERT INTO outbox_handoff (action_key, workflow, workspace_id, source_ref, source_id, rule_version, payload,
    payload_hash, destination, state, attempts, attempts_in_run, next_attempt_at, lease_owner, fencing_epoch,
    destination_id, failure_class, reason_code, last_error, attention_since, sla_due_at, acknowledged_at,
    acknowledged_by_id, created_at, updated_at, delivered_at, owner_id, instance_key, step, step_index, kind,
    plan, compensation_state, compensation_operation, work_status, receipt)
SELECT 'onboarding:' || ws || ':' || n || ':1', 'onboarding', ws, 'request ' || n || ' revision 1', n,
    'onboarding-v' || (1 + n %% 2), ('{"client_name":"Client ' || n || '","plan":"standard"}')::jsonb,
    md5(n::text) || md5(n::text), dest, st,
    CASE WHEN st = 'pending' AND n %% 2 = 0 THEN 3 WHEN st = 'pending' THEN 0 ELSE 1 END,
    CASE WHEN st = 'pending' AND n %% 2 = 1 THEN 0 ELSE 1 END,
    CASE WHEN st = 'pending' AND n %% 2 = 0 THEN now() + interval '1 day'
         WHEN st = 'pending' THEN now() ELSE NULL END,
    '', 1, CASE WHEN st = 'delivered' THEN md5(n::text) ELSE '' END,
    CASE WHEN st = 'needs_attention' THEN (ARRAY['transient', 'permanent', 'conflict'])[1 + n %% 3]
         WHEN st = 'uncertain' THEN 'uncertain' WHEN st = 'pending' AND n %% 2 = 0 THEN 'transient'
         ELSE '' END,
    CASE WHEN st = 'needs_attention' THEN (ARRAY['retries_exhausted', 'http_422', 'key_conflict'])[1 + n %% 3]
         WHEN st = 'uncertain' THEN 'response_lost' WHEN st = 'pending' AND n %% 2 = 0 THEN 'http_503'
         ELSE '' END,
    '',
    CASE WHEN st = 'needs_attention' THEN created + interval '5 minutes' END,
    CASE WHEN st = 'needs_attention' THEN created + interval '65 minutes' END,
    CASE WHEN st = 'needs_attention' AND n %% 2 = 0
        THEN created + interval '5 minutes' + (n %% 600) * interval '1 second' END,
    CASE WHEN st = 'needs_attention' AND n %% 2 = 0 THEN %(owner)s END,
    created,
    CASE WHEN st = 'delivered' THEN created + interval '2 seconds'
         WHEN st = 'needs_attention' THEN created + interval '5 minutes' + (n %% 600) * interval '1 second'
         ELSE created + interval '1 second' END,
    CASE WHEN st = 'delivered' THEN created + interval '2 seconds' END,
    CASE WHEN st = 'needs_attention' AND n %% 2 = 0 THEN %(owner)s END,
    '', '', 0, 'action', '[]'::jsonb, '', '', '', '{}'::jsonb
FROM ("""
    + MIX_SQL
    + """) AS m
"""
)

# Every handoff's approval event; the not-delivered ones' move to their state, and the acknowledgements (an
# operator's event, with an action).
EVENTS_SQL = """
INSERT INTO outbox_handoffevent (handoff_id, from_state, to_state, actor_label, action, reason, at, actor_id)
SELECT id, '', 'pending', 'alice', '', 'approved; handoff recorded', created_at, NULL::integer FROM outbox_handoff
UNION ALL
SELECT id, 'pending', state, 'dispatcher', '', reason_code, updated_at, NULL::integer FROM outbox_handoff
    WHERE NOT state = 'delivered'
UNION ALL
SELECT id, 'needs_attention', 'needs_attention', 'operator0', 'acknowledge', 'failure acknowledged',
    acknowledged_at, acknowledged_by_id FROM outbox_handoff WHERE acknowledged_by_id IS NOT NULL
"""

# One attempt for the last two days' handoffs and for every one not delivered (older delivered ones' attempts
# are left out to keep the fill short: no page reads them but a handoff's own).
ATTEMPTS_SQL = """
INSERT INTO outbox_attempt (handoff_id, number, fencing_epoch, worker, started_at, finished_at, outcome,
    failure_class, reason_code, status_code, latency_ms, detail)
SELECT id, 1, 1, 'bench:1', created_at + interval '1 second', created_at + interval '2 seconds',
    CASE state WHEN 'delivered' THEN 'created' WHEN 'uncertain' THEN 'uncertain' ELSE 'failed' END,
    failure_class, reason_code, CASE WHEN state = 'delivered' THEN 201 ELSE 503 END, 40, ''
FROM outbox_handoff
WHERE (created_at > now() - interval '2 days' OR NOT state = 'delivered') AND NOT (state = 'pending' AND attempts = 0)
"""

YEAR_MS = 365 * 24 * 3600 * 1000


def fill(bench: Bench, rows: int, owner_id: int) -> float:
    """A year of handoffs in the mix above, their events and recent attempts: one INSERT … SELECT each over
    generate_series, as the growth benches fill theirs (`harness.bulk_fill`: the table's secondary indexes
    rebuilt after the insert, every one of them kept, then vacuumed and analyzed). Returns seconds."""
    spacing_ms = max(1, YEAR_MS // rows)
    statement = HANDOFFS_SQL % {"rows": rows, "owner": owner_id, "spacing_ms": spacing_ms}
    handoffs = bulk_fill(dsn(bench.source), "outbox_handoff", statement)
    events = bulk_fill(dsn(bench.source), "outbox_handoffevent", EVENTS_SQL)
    attempts = bulk_fill(dsn(bench.source), "outbox_attempt", ATTEMPTS_SQL)
    return handoffs + events + attempts
