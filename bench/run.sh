#!/usr/bin/env bash
# `make bench`: every figure in docs/benchmarks.md, from one command, on PostgreSQL started like `make test`.
# Sizes are chosen so that the whole run stays under 20 minutes on 2 idle cores (the budget per section is in
# docs/benchmarks.md, "How a figure is taken"); override them here. bench/e2e.py runs growth at 1,000,000
# delivered rows in 3 pairs against 10,000 (a 10,000,000-row fill takes 148 s, once for its pairs, and does not
# fit; BENCH_E2E_ARGS="--growth-rows 10000 10000000 --reconcile-after-growth" runs it); reconcile_bench.py below
# reconciles RECONCILE_KEYS (issue 40's 10,000,000) on databases kept filled between runs (--keep).
# Databases are named "${BENCH_DB_PREFIX:-bench}_*" (set BENCH_DB_PREFIX to keep runs on one cluster apart).
set -euo pipefail
cd "$(dirname "$0")/.."
# BENCH_ONLY=<name> runs one section (names below) for a quick check, and writes no report: a figure in
# docs/benchmarks.md comes from a whole run.
ONLY=${BENCH_ONLY:-}
names=(e2e console reconcile destinations many_destinations tracing outside status_events console_operators
  retention settlement oauth2 search levers)
if [[ -n "$ONLY" && ! " ${names[*]} " =~ " $ONLY " ]]; then
  echo "BENCH_ONLY=$ONLY: no such section; one of: ${names[*]}" >&2
  exit 2
fi
# The report states the machine's load at both ends of the run (each figure has its own beside it).
export BENCH_LOAD_AT_START="$(cut -d' ' -f1-3 /proc/loadavg)"
PY=.venv/bin/python
# The pages are measured without collectstatic; whitenoise's notice about it is not a figure.
export PYTHONWARNINGS="ignore::UserWarning"
# The console sections measure on copies of their 1,000,000-handoff fills, kept between runs (--keep,
# bench/kept.py): a copy is seconds where a fill was 20-30 s idle; the fill is made again by the first run that
# finds a kept one missing, stale or older than 12 hours (its rows' times are its `now()`), or ahead by
# `make bench-console-kept`.
CONSOLE_ROWS=${BENCH_CONSOLE_ROWS:-1000000}
# 30 requests a page: the 95th percentile of 10 was their slowest.
CONSOLE_REPEAT=${BENCH_CONSOLE_REPEAT:-30}
# The console with 20 operators at once, against gunicorn (issue 26 asks for 10,000,000 handoffs: a fill of
# 272 s, over the budget; the largest that fits, 1,000,000, BENCH_CONSOLE_OPERATORS_ROWS=10000000 for the aim's).
CONSOLE_OPERATORS_ROWS=${BENCH_CONSOLE_OPERATORS_ROWS:-1000000}
RETENTION_ROWS=${BENCH_RETENTION_ROWS:-1000000}
# Reconciliation at issue 40's 10,000,000 keys on databases kept between runs (--keep): their fill (about 150 s
# idle) is made once, by the first run that finds them missing or stale or ahead by `make bench-reconcile-10m`, and
# later runs only check them and reconcile. In process at 10,000,000 (about 80 s idle), over the signed HTTP API at
# 1,000,000 (its own kept pair, about 16 s to fill): http at 10,000,000 would take about 140 s, 60 s more than fit.
RECONCILE_KEYS=${BENCH_RECONCILE_KEYS:-10000000}
RECONCILE_HTTP_KEYS=${BENCH_RECONCILE_HTTP_KEYS:-1000000}
E2E_ARGS=${BENCH_E2E_ARGS:---one-call-pairs 3}
# The search by client name beside the list page at issue 39's 10,000,000 handoffs, on databases kept between
# runs (--keep): the first run on a machine fills them and builds their indexes (about 12 minutes idle), later
# runs reuse them, migrated forward, while what made them holds (bench/search_bench.py; `make bench-search-10m`
# fills them ahead of a run).
SEARCH_ROWS=${BENCH_SEARCH_ROWS:-10000000}
out=var/bench
mkdir -p "$out"
started=$(date +%s)
commands=(
  "$PY bench/e2e.py --json $out/e2e.json $E2E_ARGS"
  "$PY bench/console_bench.py --rows $CONSOLE_ROWS --repeat $CONSOLE_REPEAT --keep"
  "$PY bench/reconcile_bench.py $RECONCILE_KEYS --keep --destination in_process"
  "$PY bench/destinations_bench.py --pairs 3 --json $out/destinations.json"
  "$PY bench/many_destinations_bench.py --json $out/many_destinations.json"
  "$PY bench/tracing_bench.py --pairs 5 --handoffs 800 --json $out/tracing.json"
  "$PY bench/status_events_bench.py --json $out/status_events.json"
  "$PY bench/console_operators_bench.py --rows $CONSOLE_OPERATORS_ROWS --operators 20 --rounds 2 --also-think-ms 1000 --keep --json $out/console_operators.json"
  "$PY bench/retention_bench.py --rows $RETENTION_ROWS --pairs 3 --json $out/retention.json"
)
RECONCILE_HTTP_COMMAND="$PY bench/reconcile_bench.py $RECONCILE_HTTP_KEYS --keep --destination http"
commands+=("$RECONCILE_HTTP_COMMAND")
SETTLEMENT_COMMAND="$PY bench/settlement_bench.py --json $out/settlement.json"
commands+=("$SETTLEMENT_COMMAND")
OAUTH2_COMMAND="$PY bench/oauth2_bench.py --json $out/oauth2.json"
commands+=("$OAUTH2_COMMAND")
SEARCH_COMMAND="$PY bench/search_bench.py --rows $SEARCH_ROWS --keep --json $out/search.json"
commands+=("$SEARCH_COMMAND")
# Issue 40's done-when: one call per handoff with `manage.py dispatch` as deployed and handoffs inserted by SQL.
OUTSIDE_COMMAND="$PY bench/outside_check.py --pairs 3 --json $out/outside.json"
commands+=("$OUTSIDE_COMMAND")
printf '%s\n' "${commands[@]}" | sed 's/ *$//' > "$out/commands.txt"
# Each section's wall-clock seconds, for the budget in docs/benchmarks.md ("How a figure is taken"): a whole run
# starts the file afresh, a BENCH_ONLY run adds its section's line (the estimate of that section's share).
[[ -z "$ONLY" ]] && : > "$out/section_seconds.txt"
section() {  # section <name> <log> <title> <command...>: run it unless BENCH_ONLY names another
  local name=$1 log=$2 title=$3 began
  shift 3
  [[ -n "$ONLY" && "$ONLY" != "$name" ]] && return 0
  echo "== $title =="
  began=$(date +%s)
  "$@" | tee "$out/$log"
  echo "$name $(( $(date +%s) - began )) $(cut -d' ' -f1 /proc/loadavg)" >> "$out/section_seconds.txt"
}
section e2e e2e.log "end-to-end: receiver capacity, scaling curve, one call per handoff, latency, the alternative,
   growth, backlog" ${commands[0]}
section console console.log "console pages with $CONSOLE_ROWS handoffs" ${commands[1]}
reconcile() { ${commands[2]} && $RECONCILE_HTTP_COMMAND; }
section reconcile reconcile.log "reconciliation of $RECONCILE_KEYS keys in process, $RECONCILE_HTTP_KEYS over http" \
  reconcile
section destinations destinations.log "destinations: a healthy one beside one down and one slow" ${commands[3]}
section many_destinations many_destinations.log \
  "many destinations: 100 with the traffic spread over them, against one" ${commands[4]}
section tracing tracing.log "tracing: delivery throughput with OpenTelemetry off and on" ${commands[5]}
section outside outside.log "one call per handoff driven from outside: manage.py dispatch, handoffs by SQL" \
  $OUTSIDE_COMMAND
section status_events status_events.log "status events: a receiver's change to the source's record" ${commands[6]}
section console_operators console_operators.log \
  "console pages with 20 operators at once, $CONSOLE_OPERATORS_ROWS handoffs" ${commands[7]}
section retention retention.log "retention beside 4 dispatchers, $RETENTION_ROWS settled handoffs" ${commands[8]}
section settlement settlement.log "settlement of 20,000 uncertain outcomes (4,000 one key a request) by 4 dispatchers" \
  $SETTLEMENT_COMMAND
section oauth2 oauth2.log "credentials: one call with OAuth2 client credentials against a static bearer token" \
  $OAUTH2_COMMAND
section search search.log "search by client name beside the list page, $SEARCH_ROWS handoffs" $SEARCH_COMMAND
levers=()
if [[ "${BENCH_LEVERS:-0}" == 1 || "$ONLY" == levers ]]; then
  # About 6 more minutes: over the 20-minute budget on a loaded 2-core machine, so not by default.
  section levers levers.log "levers: where the one-call path loses, inline attempt vs dispatchers" \
    $PY bench/lever_single_calls.py
  section levers growth-repeat.log "growth, small and large table alternated" $PY bench/growth_repeat.py
  levers=(--levers "$out/levers.log" --growth-repeat "$out/growth-repeat.log")
fi
if [[ -n "$ONLY" ]]; then
  echo "BENCH_ONLY=$ONLY: docs/benchmarks.md not written (its figures come from a whole run); see $out/"
  exit 0
fi
$PY bench/report.py "${levers[@]}" --e2e "$out/e2e.json" --console "$out/console.log" --console-rows "$CONSOLE_ROWS" \
  --reconcile "$out/reconcile.log" --reconcile-command "${commands[2]}" \
  --reconcile-command "$RECONCILE_HTTP_COMMAND" --commands "$out/commands.txt" \
  --destinations "$out/destinations.json" --many-destinations "$out/many_destinations.json" \
  --tracing "$out/tracing.json" --outside "$out/outside.json" --outside-command "$OUTSIDE_COMMAND" \
  --oauth2 "$out/oauth2.json" --status-events "$out/status_events.json" \
  --console-operators "$out/console_operators.json" --console-operators-command "${commands[7]}" \
  --retention "$out/retention.json" --retention-command "${commands[8]}" \
  --settlement "$out/settlement.json" --settlement-command "$SETTLEMENT_COMMAND" \
  --search "$out/search.json" \
  --section-seconds "$out/section_seconds.txt" --seconds $(( $(date +%s) - started )) --output docs/benchmarks.md
echo "written: docs/benchmarks.md ($(( ($(date +%s) - started) / 60 )) min)"
