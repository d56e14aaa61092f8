#!/usr/bin/env bash
# Proves the acceptance tests detect the faults they are written against. For each mutant in mutations/:
# copy the tree, apply the patch, run the acceptance test file that names the fault there, and succeed only
# if it fails where it must, with the message that names the fault.
#   receiver_without_idempotency: the receiver's lookup and unique key removed -> outcome (g) fails with
#     "retry returns same task: expected 1, got 2".
#   step_recorded_before_predecessor_delivered: step n+1 recorded when step n is claimed -> the step
#     ordering test fails.
# Only the test that names the fault runs. A mutant whose patch changes no migration copies its in-memory test
# databases from HANDOFF_SQLITE_TEMPLATE when that names a directory (`make test`: the SQLite streams'
# template, tests/sqlite_template.py) instead of migrating them: about 14 s of CPU (docs/testing.md).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

run_mutant() {  # patch, test that must fail, text its failure must show
  local patch=$1 test=$2 expected=$3 work out status line
  work=$(mktemp -d)
  # One cp for many files, not one a file: 0.3-0.6 s of CPU a copy instead of 2.2-2.7 s (docs/testing.md).
  git ls-files -z | xargs -0 cp --parents -t "$work"/ 2>/dev/null || tar cf - --exclude=.venv --exclude=var . | tar xf - -C "$work"
  if ! (cd "$work" && patch -p1 --quiet < "$root/mutations/$patch.patch"); then
    echo "mutation-check: $patch no longer applies; update mutations/$patch.patch"
    rm -rf "$work"; return 1
  fi
  template=${HANDOFF_SQLITE_TEMPLATE:-}
  if grep -qE '^\+\+\+ .*/migrations/' "$root/mutations/$patch.patch"; then template=""; fi
  out=$(cd "$work" && env -u DATABASE_URL -u DELIVERY_DATABASE_URL HANDOFF_VAR_DIR="$work/var" \
    HANDOFF_SQLITE_TEMPLATE="$template" "$root/.venv/bin/python" -m pytest "$test" -q -p no:cacheprovider 2>&1)
  status=$?
  rm -rf "$work"
  line=$(grep -m1 -E "$expected" <<<"$out")
  if [ $status -ne 0 ] && grep -q "FAILED $test" <<<"$out" && [ -n "$line" ]; then
    echo "mutation-check: $patch -> acceptance FAILS as it must:"
    echo "  FAIL: ${line#*AssertionError: }"
    grep -E "^FAILED" <<<"$out" | sed 's/^/  /'
    return 0
  fi
  echo "mutation-check: the acceptance tests did NOT detect $patch (exit $status)"
  echo "$out" | tail -30
  return 1
}

run_mutant receiver_without_idempotency \
  "tests/acceptance/test_onboarding_handoff.py::test_g_retry_with_same_key_returns_same_task" \
  "retry returns same task: expected 1, got [0-9]+" || exit 1
run_mutant step_recorded_before_predecessor_delivered \
  "tests/acceptance/test_workflow_compensation.py::test_three_steps_each_with_its_own_key_recorded_one_after_another" \
  "a step is never recorded before its predecessor is delivered|step 2 is recorded only when step 1 is delivered" || exit 1
