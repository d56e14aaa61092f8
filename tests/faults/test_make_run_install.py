"""The install step of `make run` on a fresh clone (issue 24 item 8: the first page waited behind a screen of
installer output with the password in the middle of it): one line says what is being installed, and the
installer's own output goes to .venv/install.log, shown only if the install fails. Run in a copy of the tree
with a virtualenv of its own, from the same hashed lock `make test` installed (uv's cache makes it quick)."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.faults.test_make_run import tracked_copy

pytestmark = [pytest.mark.demo]
# This suite's settings, and the make that runs it (`make test` runs the suites under -j: its jobserver's
# MAKEFLAGS made the inner make warn "jobserver unavailable"), are not a newcomer's shell.
SUITE_PREFIXES = (
    "DJANGO",
    "DATABASE_URL",
    "DELIVERY_DATABASE_URL",
    "HANDOFF",
    "PYTEST",
    "VIRTUAL_ENV",
    "MAKE",
    "MFLAGS",
)
ANNOUNCED = (
    "installing the locked dependencies into .venv "
    "(the installer's output is shown only if it fails)"
)


@pytest.fixture
def fresh_copy(tmp_path) -> Path:
    """The tracked files as a fresh clone has them, with no virtualenv."""
    return tracked_copy(tmp_path / "checkout")


def make_venv(copy: Path) -> subprocess.CompletedProcess:
    # The machine's environment as a newcomer's shell has it: the package index is reached through its
    # certificates (SSL_CERT_FILE and the like); this suite's own settings are left out.
    env = {k: v for k, v in os.environ.items() if not k.startswith(SUITE_PREFIXES)}
    return subprocess.run(
        ["make", "--no-print-directory", "venv"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_fresh_install_prints_one_line_and_keeps_the_installers_output_in_a_log(fresh_copy):
    done = make_venv(fresh_copy)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (done.stdout + done.stderr).strip().splitlines() == [ANNOUNCED]
    assert (fresh_copy / ".venv" / "install.log").exists()
    assert (fresh_copy / ".venv" / "bin" / "django-admin").exists(), "Django is installed"


def test_a_failed_install_shows_the_installers_output(fresh_copy):
    lock = fresh_copy / "requirements" / "lock.txt"
    # Every hash of one pinned package (installed by uv, after pip's uv) replaced: no file matches it.
    wrong = re.sub(
        r"(?m)^aiosmtpd==[^\n]*\n(?:\s+--hash=sha256:[0-9a-f]{64}[^\n]*\n)+",
        lambda block: re.sub("[0-9a-f]{64}", "0" * 64, block.group(0)),
        lock.read_text(),
    )
    assert wrong != lock.read_text(), "the lock pins aiosmtpd with hashes"
    lock.write_text(wrong)
    # The lock is newer than the stamp either way (no stamp yet); make installs from it.
    done = make_venv(fresh_copy)
    printed = done.stdout + done.stderr
    assert done.returncode != 0
    assert printed.strip().splitlines()[0] == ANNOUNCED
    assert "hash" in printed.lower(), "the installer's own words say why: " + printed[-2000:]
