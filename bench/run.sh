#!/usr/bin/env bash
# `make bench`: every figure in docs/benchmarks.md, from one command, on PostgreSQL started like `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# The pages are measured without collectstatic; whitenoise's notice about it is not a figure.
export PYTHONWARNINGS="ignore::UserWarning"
out=var/bench
mkdir -p "$out"
started=$(date +%s)
echo "== end-to-end throughput, latency, the alternative, growth, memory =="
$PY bench/e2e.py --json "$out/e2e.json" | tee "$out/e2e.log"
echo "== console pages with 100,000 handoffs =="
$PY bench/console_bench.py --rows 100000 --repeat 20 | tee "$out/console.log"
echo "== reconciliation of 1,000,000 handoffs =="
$PY bench/reconcile_bench.py 1000000 | tee "$out/reconcile.log"
$PY bench/report.py --e2e "$out/e2e.json" --console "$out/console.log" --reconcile "$out/reconcile.log" \
  --seconds $(( $(date +%s) - started )) --output docs/benchmarks.md
echo "written: docs/benchmarks.md"
