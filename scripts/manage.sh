#!/usr/bin/env bash
# manage.py with `make run`'s settings (var/run.env's secrets, the demo's port and addresses), for the
# commands the terminal and the README print, in another terminal while `make run` serves:
#   scripts/manage.sh demo_passwords
#   scripts/manage.sh task_status onboarding:7:42:1:create_client done
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if [ ! -f var/run.env ]; then
  echo "no demo here yet: start it once with make run" >&2
  exit 2
fi
PORT=${PORT:-$(cat var/run.port 2>/dev/null || echo 8000)}
source scripts/local_env.sh
exec $PY manage.py "$@"
