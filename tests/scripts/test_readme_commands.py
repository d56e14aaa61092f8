"""Every shell command README.md prints in a code block is run here as printed, or is named below with the
test that runs it or why no test can. A new command in the README fails this test until it is one or the
other, so that no command a newcomer copies is left untried."""

import os
import re
import subprocess

import pytest

from tests.processes import ROOT

# Commands another test runs as printed (where it is the process of a running `make run`).
RUN_ELSEWHERE = {
    "scripts/manage.sh demo_passwords": "tests/faults/test_make_run.py, after make run in a copy",
    "scripts/manage.sh demo_passwords --password s3cret-demo": (
        "tests/faults/test_make_run.py runs it with another password"
    ),
    "scripts/manage.sh demo_receiver_outage --seconds 60": (
        "tests/faults/test_make_run.py (the terminal prints it); tests/delivery/test_outage.py"
    ),
    "make run": "tests/faults/test_make_run.py starts it on a port the kernel chose in a copy of the tree",
    "PORT=8123 make run": "tests/faults/test_make_run.py starts it with PORT set",
    "scripts/manage.sh task_status onboarding:7:42:1:create_client done": (
        "tests/faults/test_make_run.py, once make run delivered request 42's first step"
    ),
}
# Commands no test runs, and why.
NOT_RUN = {
    "make test": "the whole suite, this test included (about 17 minutes)",
    "make lint": "the first step of make test",
    "python3 scripts/make_load.py --load 10 --seconds 1800": (
        "loads the machine for half an hour; tests/scripts/test_make_load.py runs it for seconds"
    ),
    "make lock": "recompiles the lock from the package index; make lock-check (in make test) checks it",
    """RECEIVER_FAULTS='{"keys": {"onboarding:7:42:1:create_client": "drop_after_commit"}}' make run""": (
        "serves until Ctrl-C; the key's fault itself is tests/delivery/test_fault_wrapper.py's"
    ),
}
# The lines of the PostgreSQL block: its URLs are the reader's server; run here with this suite's databases.
POSTGRES_BLOCK = (
    "export DATABASE_URL=postgres://user:password@host:5432/handoff",
    "export DELIVERY_DATABASE_URL=postgres://user:password@host:5432/handoff_delivery",
)


def readme_commands() -> list[str]:
    """The commands of README.md's sh code blocks, one a line, comments and blank lines left out."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command = re.sub(r"\s+#\s.*$", "", line).strip()
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


def readme_inline_commands() -> list[str]:
    """The `scripts/manage.sh …` commands README.md's text quotes inline (a quote may span a line break)."""
    text = (ROOT / "README.md").read_text()
    quoted = re.findall(r"`(scripts/manage\.sh [^`]+)`", text)
    return [" ".join(command.split()) for command in quoted if command.split()[1:2] != ["…"]]


def test_every_readme_command_is_run_or_says_why_not():
    known = set(RUN_ELSEWHERE) | set(NOT_RUN) | set(POSTGRES_BLOCK) | {SECRET_KEY_LINE, MIGRATE}
    unlisted = [c for c in readme_commands() + readme_inline_commands() if c not in known]
    assert unlisted == [], f"README commands no test runs or names: {unlisted}"
    gone = sorted(known - set(readme_commands()) - set(readme_inline_commands()))
    assert gone == [], f"named here but no longer in the README: {gone}"


SECRET_KEY_LINE = (
    "export DJANGO_SECRET_KEY=\"$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')\""
)
MIGRATE = (
    ".venv/bin/python manage.py migrate && .venv/bin/python manage.py migrate --database delivery"
)


@pytest.mark.demo
def test_the_database_block_migrates_both_databases_as_printed(tmp_path):
    """The block as printed, in a shell with nothing of this suite's environment but the databases: this
    suite's SQLite files in a fresh var directory stand in for the reader's server (the URLs are theirs)."""
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    env["HANDOFF_VAR_DIR"] = str(tmp_path)
    script = "\n".join(["set -e", SECRET_KEY_LINE, MIGRATE])
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list(tmp_path.glob("*.sqlite3"))) == 2, "both databases, each its own file"
