#!/usr/bin/env bash
# `make bench`: every figure in docs/benchmarks.md, from one command, on PostgreSQL started like `make test`.
# Sizes are chosen so that the whole run stays under 20 minutes on a 2-core machine; override them here.
# bench/e2e.py runs growth at 10,000, 1,000,000 and 10,000,000 delivered rows and then reconciles the
# 10,000,000-row outbox through the http destination (one fill for both figures); reconcile_bench.py below
# measures both destinations at RECONCILE_KEYS on its own fill.
# Databases are named "${BENCH_DB_PREFIX:-bench}_*" (set BENCH_DB_PREFIX to keep runs on one cluster apart).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# The pages are measured without collectstatic; whitenoise's notice about it is not a figure.
export PYTHONWARNINGS="ignore::UserWarning"
CONSOLE_ROWS=${BENCH_CONSOLE_ROWS:-1000000}
CONSOLE_REPEAT=${BENCH_CONSOLE_REPEAT:-10}
# The console with 20 operators at once, against gunicorn (issue 26 asks for 10,000,000 handoffs).
CONSOLE_OPERATORS_ROWS=${BENCH_CONSOLE_OPERATORS_ROWS:-10000000}
RETENTION_ROWS=${BENCH_RETENTION_ROWS:-1000000}
RECONCILE_KEYS=${BENCH_RECONCILE_KEYS:-1000000}
E2E_ARGS=${BENCH_E2E_ARGS:-}
out=var/bench
mkdir -p "$out"
started=$(date +%s)
commands=(
  "$PY bench/e2e.py --json $out/e2e.json $E2E_ARGS"
  "$PY bench/console_bench.py --rows $CONSOLE_ROWS --repeat $CONSOLE_REPEAT"
  "$PY bench/reconcile_bench.py $RECONCILE_KEYS"
  "$PY bench/destinations_bench.py --json $out/destinations.json"
  "$PY bench/many_destinations_bench.py --json $out/many_destinations.json"
  "$PY bench/tracing_bench.py --pairs 4 --json $out/tracing.json"
  "$PY bench/status_events_bench.py --json $out/status_events.json"
  "$PY bench/console_operators_bench.py --rows $CONSOLE_OPERATORS_ROWS --operators 20 --rounds 2 --also-think-ms 1000 --json $out/console_operators.json"
  "$PY bench/retention_bench.py --rows $RETENTION_ROWS --pairs 2 --json $out/retention.json"
)
SETTLEMENT_COMMAND="$PY bench/settlement_bench.py --json $out/settlement.json"
commands+=("$SETTLEMENT_COMMAND")
OAUTH2_COMMAND="$PY bench/oauth2_bench.py --json $out/oauth2.json"
commands+=("$OAUTH2_COMMAND")
printf '%s\n' "${commands[@]}" | sed 's/ *$//' > "$out/commands.txt"
echo "== end-to-end: receiver capacity, scaling curve, one call per handoff, latency, the alternative, growth and"
echo "   reconciliation of its largest outbox, backlog =="
${commands[0]} | tee "$out/e2e.log"
echo "== console pages with $CONSOLE_ROWS handoffs =="
${commands[1]} | tee "$out/console.log"
echo "== reconciliation of $RECONCILE_KEYS keys =="
${commands[2]} | tee "$out/reconcile.log"
echo "== destinations: a healthy one beside one down and one slow =="
${commands[3]} | tee "$out/destinations.log"
echo "== many destinations: 100 with the traffic spread over them, against one =="
${commands[4]} | tee "$out/many_destinations.log"
echo "== tracing: delivery throughput with OpenTelemetry off and on =="
${commands[5]} | tee "$out/tracing.log"
echo "== status events: a receiver's change to the source's record =="
${commands[6]} | tee "$out/status_events.log"
echo "== console pages with 20 operators at once, $CONSOLE_OPERATORS_ROWS handoffs =="
${commands[7]} | tee "$out/console_operators.log"
echo "== retention beside 4 dispatchers, $RETENTION_ROWS settled handoffs =="
${commands[8]} | tee "$out/retention.log"
echo "== settlement of 2,000 uncertain outcomes with 1, 2 and 4 dispatchers =="
$SETTLEMENT_COMMAND | tee "$out/settlement.log"
echo "== credentials: one call with OAuth2 client credentials against a static bearer token =="
$OAUTH2_COMMAND | tee "$out/oauth2.log"
levers=()
if [[ "${BENCH_LEVERS:-0}" == 1 ]]; then
  # About 6 more minutes: over the 20-minute budget on a loaded 2-core machine, so not by default.
  echo "== levers: where the one-call path loses, inline attempt vs dispatchers =="
  $PY bench/lever_single_calls.py | tee "$out/levers.log"
  echo "== growth, small and large table alternated =="
  $PY bench/growth_repeat.py | tee "$out/growth-repeat.log"
  levers=(--levers "$out/levers.log" --growth-repeat "$out/growth-repeat.log")
fi
$PY bench/report.py "${levers[@]}" --e2e "$out/e2e.json" --console "$out/console.log" --console-rows "$CONSOLE_ROWS" \
  --reconcile "$out/reconcile.log" --reconcile-keys "$RECONCILE_KEYS" --commands "$out/commands.txt" \
  --destinations "$out/destinations.json" --many-destinations "$out/many_destinations.json" \
  --tracing "$out/tracing.json" --oauth2 "$out/oauth2.json" --status-events "$out/status_events.json" \
  --console-operators "$out/console_operators.json" --console-operators-command "${commands[7]}" \
  --retention "$out/retention.json" --retention-command "${commands[8]}" \
  --settlement "$out/settlement.json" --settlement-command "$SETTLEMENT_COMMAND" \
  --seconds $(( $(date +%s) - started )) --output docs/benchmarks.md
echo "written: docs/benchmarks.md ($(( ($(date +%s) - started) / 60 )) min)"
