#!/usr/bin/env bash
# Proves the acceptance tests detect the duplicate-delivery fault: copy the tree, remove the
# receiver's lookup and its unique constraint (mutations/receiver_without_idempotency.patch), run
# the acceptance tests there, and succeed only if they fail at outcome (g) with a second task.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git ls-files -z | xargs -0 -I{} cp --parents {} "$work"/ 2>/dev/null || tar cf - --exclude=.venv --exclude=var . | tar xf - -C "$work"
cd "$work"
if ! patch -p1 --quiet < "$root/mutations/receiver_without_idempotency.patch"; then
  echo "mutation-check: the patch no longer applies; update mutations/receiver_without_idempotency.patch"
  exit 1
fi
out=$(env -u DATABASE_URL -u DELIVERY_DATABASE_URL HANDOFF_VAR_DIR="$work/var" \
  "$root/.venv/bin/python" -m pytest tests/acceptance -q -p no:randomly -p no:cacheprovider 2>&1)
status=$?
line=$(grep -m1 -E "retry returns same task: expected 1, got [0-9]+" <<<"$out")
if [ $status -ne 0 ] && grep -q "FAILED tests/acceptance/test_onboarding_handoff.py::test_g_retry_with_same_key_returns_same_task" <<<"$out" && [ -n "$line" ]; then
  echo "mutation-check: receiver without lookup and unique key -> acceptance FAILS as it must:"
  echo "  FAIL: ${line#*AssertionError: }"
  grep -E "^FAILED" <<<"$out" | sed 's/^/  /'
  exit 0
fi
echo "mutation-check: the acceptance tests did NOT detect the removed idempotency (exit $status)"
echo "$out" | tail -30
exit 1
