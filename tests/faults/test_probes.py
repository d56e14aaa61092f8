"""The probes with real processes: the web process's /healthz and /readyz while its database goes away and
comes back (a private PostgreSQL server), and a real dispatcher's readiness (`manage.py dispatcher_ready`)
while its loop turns, is frozen, turns again and stops."""

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.faults.conftest import START_DEADLINE_SECONDS
from tests.faults.test_dispatch_faults import wait_until
from tests.processes import LOCAL_HTTP, ROOT, manage_argv

pytestmark = [pytest.mark.postgres, pytest.mark.faults]


def _probe(base: str, path: str) -> httpx.Response:
    return LOCAL_HTTP.get(base + path, timeout=10)


def test_web_probes_follow_the_database_and_say_nothing_secret(private_postgres, private_processes):
    procs, server = private_processes, private_postgres
    procs.start_receiver()
    base = procs.receiver_url.removesuffix("/delivery/api")
    assert _probe(base, "/healthz").status_code == 200
    assert (_probe(base, "/readyz").status_code, _probe(base, "/readyz").text) == (200, "ready\n")

    server.stop()
    try:
        assert _probe(base, "/healthz").text == "ok\n", "alive without its database"
        answer = _probe(base, "/readyz")
        assert answer.status_code == 503
        assert "database default: unreachable (OperationalError)" in answer.text
        assert "database delivery: unreachable (OperationalError)" in answer.text
        for secret in (str(server.sockets), str(server.port), server.user, "handoff_delivery"):
            assert secret not in answer.text
    finally:
        server.resume()
    wait_until(
        lambda: _probe(base, "/readyz").status_code == 200,
        timeout=START_DEADLINE_SECONDS,
        what="/readyz ready again once the database is back",
        procs=[procs.receiver],
    )


def _ready(procs, var_dir: Path, worker: str, within: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        manage_argv("dispatcher_ready", "--worker", worker, "--within", str(within)),
        cwd=ROOT,
        env=procs.dispatcher_env(HANDOFF_VAR_DIR=str(var_dir)),
        capture_output=True,
        text=True,
        # A manage.py start on a loaded machine: at a load of 13 one took over a minute to answer.
        timeout=START_DEADLINE_SECONDS,
    )


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_dispatcher_readiness_follows_its_loop(processes, tmp_path):
    var_dir, within = tmp_path / "var", 2.0
    processes.start_receiver()
    dispatcher = processes.start_dispatcher("probed", HANDOFF_VAR_DIR=str(var_dir))
    wait_until(
        lambda: _ready(processes, var_dir, "probed", within).returncode == 0,
        timeout=START_DEADLINE_SECONDS,
        what="the dispatcher ready",
        procs=[dispatcher],
    )
    assert (
        "ready: dispatcher probed: loop turning" in _ready(processes, var_dir, "probed", 30).stdout
    )

    os.kill(dispatcher.pid, signal.SIGSTOP)  # a loop that no longer turns
    try:
        wait_until(
            lambda: _ready(processes, var_dir, "probed", within).returncode == 1,
            timeout=START_DEADLINE_SECONDS,
            what="a frozen dispatcher not ready",
        )
        frozen = _ready(processes, var_dir, "probed", within)
        assert "not ready: dispatcher probed: last beat" in frozen.stderr
    finally:
        os.kill(dispatcher.pid, signal.SIGCONT)
    wait_until(
        lambda: _ready(processes, var_dir, "probed", within).returncode == 0,
        timeout=START_DEADLINE_SECONDS,
        what="the dispatcher ready again once it turns",
        procs=[dispatcher],
    )

    dispatcher.send_signal(signal.SIGTERM)
    dispatcher.wait(timeout=60)
    wait_until(
        lambda: _ready(processes, var_dir, "probed", within).returncode == 1,
        timeout=START_DEADLINE_SECONDS,
        what="a stopped dispatcher not ready",
    )
