"""`make run` as a newcomer meets it, in a copy of the tree: it serves on the PORT asked for, with the
console's own pages; Ctrl-C (SIGINT) stops everything and ends with status 0; a second run serves the same
data; every command the terminal prints works as printed in another terminal, and the README's resets the
demo passwords. The servers log to files under var/log: once the first page answers, the terminal's last lines
are the console's address and the password (or how to set one), and no log line follows them."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.processes import LOCAL_HTTP, ROOT, KernelPort

pytestmark = [pytest.mark.demo]


def tracked_copy(copy: Path) -> Path:
    """The tracked files copied to `copy`, as a fresh clone has them (no virtualenv, nothing untracked)."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    for name in filter(None, files.decode().split("\0")):
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        source = ROOT / name
        if source.is_file():
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)  # scripts keep their executable bit, as in a clone
    return copy


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The tracked files, as a fresh clone has them, with the project's virtualenv."""
    copy = tracked_copy(tmp_path / "checkout")
    (copy / ".venv").symlink_to(Path(sys.prefix))
    return copy


def clean_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "PGHOST")
    return {name: os.environ[name] for name in keep if name in os.environ}


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def ports():
    """The console's and the demo mailbox's ports, the kernel's choice, held across both runs
    (tests/processes.py)."""
    with KernelPort() as web, KernelPort() as smtp:
        yield web, smtp


@pytest.fixture
def started():
    """Start `make run`'s script; whatever a failing test leaves running is stopped (servers and all)."""
    procs = []

    def start(checkout: Path, ports: tuple[KernelPort, KernelPort], log: Path) -> subprocess.Popen:
        # The web app and the demo mailbox listen on the sockets handed down, bound to the held ports.
        web, smtp = (port.listener() for port in ports)
        env = {
            **clean_env(),
            "PORT": str(ports[0].port),
            "HANDOFF_WEB_FD": str(web.fileno()),
            "DEMO_SMTP_PORT": str(ports[1].port),
            "DEMO_SMTP_FD": str(smtp.fileno()),
        }
        with web, smtp:
            proc = _start_run_local(checkout, env, log)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def _start_run_local(checkout: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", "scripts/run_local.sh"],
        cwd=checkout,
        env=env,
        pass_fds=(int(env["HANDOFF_WEB_FD"]), int(env["DEMO_SMTP_FD"])),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        # Ctrl-C as a terminal delivers it: a run started from a background job inherits SIGINT ignored,
        # which bash cannot trap ("signals ignored upon entry cannot be trapped"), and the script would
        # then never see the Ctrl-C this test sends.
        preexec_fn=_sigint_default,
    )


def wait_for_login_page(port: int, proc: subprocess.Popen, log: Path) -> httpx.Response:
    # A first start migrates both databases, collects the static files and loads the demo: over 120 s on a
    # 2-core machine at load 16 (a fresh clone's first page took 647 s there, the installs included).
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            response = LOCAL_HTTP.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=2)
            if response.status_code == 200:
                return response
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("make run never served the login page:\n" + log.read_text()[-3000:])


def terminal_ends_with_the_address(port: int, proc: subprocess.Popen, log: Path) -> list[str]:
    """The terminal's last lines once the first page answered: they end with the console's address, under the
    password (or how to set one), and nothing is printed after them while the page is used for a while (the
    servers' logs, each request's access line among them, go to var/log)."""
    address = f"Console: http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while address not in log.read_text() and time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.3)
    printed = log.read_text()
    assert address in printed, printed[-3000:]
    # A few seconds of use: every request would print an access log line, the workers their start-up.
    quiet_until = time.monotonic() + 5
    while time.monotonic() < quiet_until:
        assert (
            LOCAL_HTTP.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=60).status_code
            == 200
        )
        time.sleep(0.5)
    assert log.read_text() == printed, (
        "printed after the address:\n" + log.read_text()[len(printed) :]
    )
    last = printed.rstrip("\n").splitlines()[-6:]
    assert last[-1].startswith(address), last
    assert any("scripts/manage.sh demo_passwords" in line for line in last), last
    return last


def stop_with_ctrl_c(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=60)


def password_works(checkout: Path, username: str, password: str) -> bool:
    code = (
        "from django.contrib.auth import get_user_model; "
        f"print(get_user_model().objects.get(username={username!r}).check_password({password!r}))"
    )
    env = {
        **clean_env(),
        **dict(line.split("=", 1) for line in (checkout / "var/run.env").read_text().split()),
    }
    done = subprocess.run(
        [".venv/bin/python", "manage.py", "shell", "-c", code],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip().splitlines()[-1:] == ["True"]


# The README's demo command for a task's work (inline in its text, so tests/scripts/test_readme_commands.py
# names this test for it), run as printed once request 42 is approved and its first step delivered.
README_TASK_STATUS = "scripts/manage.sh task_status onboarding:7:42:1:create_client done"
APPROVE_42 = (
    "from approvals.models import Request; from approvals.services import request_approve; "
    "from django.contrib.auth import get_user_model; "
    "r = Request.objects.get(workspace_id=7, number=42, revision=1); "
    "request_approve(workspace_id=7, number=42, revision=1, payload_hash=r.payload_hash, "
    "actor=get_user_model().objects.get(username='alice'))"
)


def the_readmes_task_status_works_once_the_first_step_is_delivered(checkout: Path) -> None:
    def run(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=checkout,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )

    approved = run(f'scripts/manage.sh shell -c "{APPROVE_42}"')
    assert approved.returncode == 0, approved.stderr[-2000:]
    deadline = time.monotonic() + 60
    while (
        True
    ):  # the dispatcher of make run delivers step 1; until then the receiver has no such task
        done = run(README_TASK_STATUS)
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        assert "no task has the action key" in done.stderr, done.stderr[-2000:]
        time.sleep(0.5)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "onboarding:7:42:1:create_client: open -> done" in done.stdout


def test_make_run_twice_on_a_port_stops_cleanly_and_keeps_its_data(
    checkout, started, ports, tmp_path
):
    port = ports[0].port
    first = started(checkout, ports, tmp_path / "first.log")
    login = wait_for_login_page(port, first, tmp_path / "first.log")
    assert "Sign in" in login.text
    missing = LOCAL_HTTP.get(f"http://127.0.0.1:{port}/no-such-page/", timeout=60)
    assert missing.status_code == 404 and "URLconf" not in missing.text, (
        "the console's own 404, DEBUG off"
    )
    assert "server" not in {name.lower() for name in missing.headers}, "no software banner"
    last = terminal_ends_with_the_address(port, first, tmp_path / "first.log")
    # The password on a line of its own, under the line that says what it is, just above the address.
    password = re.search(r"Password for every demo user[^\n]*:\n +(\S+)\n", "\n".join(last) + "\n")
    assert password, last
    password = password.group(1)
    web_log = (checkout / "var" / "log" / "web.log").read_text()
    assert '"GET /accounts/login/ HTTP/1.1" 200' in web_log, "the access log is in var/log/web.log"
    the_readmes_task_status_works_once_the_first_step_is_delivered(checkout)
    assert stop_with_ctrl_c(first) == 0
    first_log = (tmp_path / "first.log").read_text()

    second = started(checkout, ports, tmp_path / "second.log")
    wait_for_login_page(port, second, tmp_path / "second.log")
    # No password on a second run: the line above the address says how to set new ones.
    assert any(
        "already loaded" in line
        for line in terminal_ends_with_the_address(port, second, tmp_path / "second.log")
    )
    assert stop_with_ctrl_c(second) == 0
    assert "demo data already loaded" in (tmp_path / "second.log").read_text()
    assert password_works(checkout, "alice", password), "the second run serves the same data"

    # Every command the terminal printed works as printed, in another terminal (no environment of its own).
    printed = re.findall(r"In another terminal: (scripts/\S+ [^(]+?) +\(", first_log)
    assert printed == [
        "scripts/manage.sh demo_receiver_outage --seconds 60",
        "scripts/manage.sh demo_passwords",
    ], printed
    outputs = {}
    for command in printed:
        done = subprocess.run(
            ["bash", "-c", command], cwd=checkout, env=clean_env(), capture_output=True, text=True
        )
        assert done.returncode == 0, f"{command}: {done.stderr}"
        outputs[command] = done.stdout
    assert "answers 503 to every call until" in outputs[printed[0]]
    assert (checkout / "var" / "receiver-outage-until").exists(), (
        "the outage's switch, in make run's var"
    )
    new = re.search(r"New password for [^\n]*:\n +(\S+)", outputs[printed[1]]).group(1)
    assert password_works(checkout, "alice", new) and not password_works(
        checkout, "alice", password
    )

    reset = subprocess.run(
        ["bash", "-c", "scripts/manage.sh demo_passwords --password new-demo-pass-1234"],
        cwd=checkout,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reset.returncode == 0, reset.stderr
    assert password_works(checkout, "alice", "new-demo-pass-1234")
    assert not password_works(checkout, "alice", new)
