"""What `make run` writes for itself is readable by its owner (and group) only, whatever the umask: the servers'
log files under var/log 0640 in a 0750 directory, re-created at each start (a mode or a link an older run left is
not kept), and the demo's secrets in var/run.env 0600 (ASVS 5.0 16.4.2, 13.3.1; docs/observability.md "Log
inventory"). The scripts run as `make run` runs them, in a directory of their own."""

import re
import shutil
import stat
import subprocess
from pathlib import Path

from tests.processes import ROOT


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def run_sourced(cwd: Path, script: str, command: str) -> None:
    (cwd / "scripts").mkdir(exist_ok=True)
    shutil.copy(ROOT / "scripts" / script, cwd / "scripts" / script)
    subprocess.run(
        ["bash", "-c", f"set -euo pipefail; umask 000; source scripts/{script}; {command}"],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PY": str(ROOT / ".venv" / "bin" / "python"), "PORT": "8000"},
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_make_runs_log_files_are_created_for_owner_and_group_only(tmp_path):
    logs = tmp_path / "var" / "log"
    logs.mkdir(parents=True, mode=0o777)
    logs.chmod(0o777)
    old = logs / "web.log"
    old.write_text("an older run's lines\n")
    old.chmod(0o666)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not a log\n")
    (logs / "workers.log").symlink_to(elsewhere)

    run_sourced(tmp_path, "log_files.sh", "open_log_files var/log web workers mailbox alert-sink")

    assert mode(logs) == 0o750
    for name in ("web", "workers", "mailbox", "alert-sink"):
        log = logs / f"{name}.log"
        assert log.is_file() and not log.is_symlink(), name
        assert mode(log) == 0o640, (name, oct(mode(log)))
        assert log.read_text() == "", name
    assert elsewhere.read_text() == "not a log\n", "a planted link is replaced, never followed"


def test_make_run_uses_the_log_files_function_for_every_server_it_starts():
    script = (ROOT / "scripts" / "run_local.sh").read_text()
    assert "open_log_files var/log web workers mailbox alert-sink" in script
    redirected = sorted(set(re.findall(r"> var/log/([\w-]+)\.log", script)))
    assert redirected == ["alert-sink", "mailbox", "web", "workers"]


def test_the_demos_secrets_file_is_owner_only_even_when_an_older_run_left_it_readable(tmp_path):
    run_sourced(tmp_path, "local_env.sh", "true")
    secrets_file = tmp_path / "var" / "run.env"
    assert mode(secrets_file) == 0o600
    assert secrets_file.read_text().startswith("DJANGO_SECRET_KEY=")

    secrets_file.chmod(0o644)
    run_sourced(tmp_path, "local_env.sh", "true")
    assert mode(secrets_file) == 0o600
