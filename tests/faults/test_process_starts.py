"""How the fault tests start the product's commands: without Django's system checks (`--skip-checks`, a quarter
of a `dispatch --once`'s CPU, tests/processes.py), while a command started as a deployment starts it still runs
them and refuses what they refuse. A mail server's user without its password (outbox.E002) is a configuration
that only the checks refuse at a dispatcher's start. And an outage without a process stopped and started
again: the gate in front of a server (tests/processes.py) refuses connections while down, as a stopped
server's port does, and passes them on once up."""

import socket
import subprocess
import sys
import threading

import pytest

from tests.processes import ROOT, Gate, KernelPort, manage_argv

pytestmark = [pytest.mark.postgres, pytest.mark.faults]
NO_RECEIVER = {"RECEIVER_URL": "http://127.0.0.1:9/delivery/api"}
# The mail server's user, its password not set: the system checks' outbox.E002.
MAIL_USER_WITHOUT_PASSWORD = {"EMAIL_HOST_USER": "mailer", "EMAIL_HOST_PASSWORD": ""}


def test_a_command_that_runs_the_checks_is_started_without_them_and_one_that_runs_none_as_it_is():
    assert manage_argv("dispatch", "--once")[2:] == ["dispatch", "--skip-checks", "--once"]
    assert manage_argv("reconcile")[2:] == ["reconcile", "--skip-checks"]
    # These take no --skip-checks: they would refuse it.
    assert manage_argv("shell", "-c", "pass")[2:] == ["shell", "-c", "pass"]
    assert manage_argv("check", "--deploy")[2:] == ["check", "--deploy"]


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_test_dispatcher_starts_without_the_system_checks_and_a_deployed_one_still_refuses(
    processes,
):
    env = processes.dispatcher_env(**NO_RECEIVER, **MAIL_USER_WITHOUT_PASSWORD)
    out = processes.dispatch_once("d1", **NO_RECEIVER, **MAIL_USER_WITHOUT_PASSWORD)
    assert out.startswith("claimed=0 delivered=0"), out

    deployed = subprocess.run(
        [sys.executable, "manage.py", "dispatch", "--once", "--worker", "d1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert deployed.returncode != 0
    assert "outbox.E002" in deployed.stderr, deployed.stderr[-3000:]


def test_a_gate_refuses_connections_while_down_and_passes_them_on_while_up():
    with KernelPort() as held:
        server = held.listener()
        server.listen()

        def echo() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(conn.recv(100).upper())

        threading.Thread(target=echo, daemon=True).start()
        gate = Gate(held.port)
        try:
            for _ in range(2):
                with socket.create_connection(("127.0.0.1", gate.port), timeout=10) as conn:
                    conn.sendall(b"ping")
                    assert conn.recv(100) == b"PING"
                gate.down()
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.1", gate.port), timeout=10)
                gate.up()
        finally:
            gate.close()
            server.close()
