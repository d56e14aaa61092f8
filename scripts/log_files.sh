# Sourced by `make run` (scripts/run_local.sh): the servers' log files under var/log, created empty at each
# start and readable by their owner and group only (files 0640, the directory 0750), whatever the umask and
# whatever mode an older run left them with. docs/observability.md, "Log inventory".
open_log_files() {
  local dir=$1
  shift
  mkdir -p "$dir"
  chmod 0750 "$dir"
  local name
  for name in "$@"; do
    rm -f "$dir/$name.log"
    (umask 0137 && : > "$dir/$name.log")
    chmod 0640 "$dir/$name.log"
  done
}
