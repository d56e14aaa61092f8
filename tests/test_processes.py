"""The tests' ports (tests/processes.py): the kernel chooses them and the test holds them, so that while its
server is down connections are refused and no other process can take the port."""

import os
import socket
import subprocess
import sys

import pytest

from tests.processes import KernelPort, loaded_deadline, popen_listening

# A server of one answer a connection, on the socket it inherits: it says "up" once it listens.
ECHO_SERVER = """
import socket, sys
server = socket.socket(fileno=int(sys.argv[1]))
server.listen()
print("up", flush=True)
while True:
    connection, _ = server.accept()
    connection.sendall(sys.argv[2].encode())
    connection.close()
"""


def _connect(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        return connection.recv(100)


def _start(held: KernelPort, answer: str) -> subprocess.Popen:
    server = popen_listening(
        lambda fd: [sys.executable, "-c", ECHO_SERVER, str(fd), answer],
        held,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout.readline().strip() == "up"
    return server


def _stop(server: subprocess.Popen) -> None:
    server.kill()
    server.wait(timeout=60)
    server.stdout.close()


@pytest.mark.parametrize("reuse_address", [False, True])
def test_a_held_port_refuses_connections_and_another_process_cannot_listen_there(reuse_address):
    with KernelPort() as held:
        with pytest.raises(ConnectionRefusedError):
            _connect(held.port)
        # What another test run's server does: bind the port (most set SO_REUSEADDR first).
        with socket.socket() as other:
            if reuse_address:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError, match="in use"):
                other.bind(("127.0.0.1", held.port))


def test_a_server_stopped_and_started_again_answers_on_the_same_port_refused_in_between():
    with KernelPort() as held:
        first = _start(held, "first")
        try:
            assert _connect(held.port) == b"first"
        finally:
            _stop(first)
        # The outage: refused (not queued by a socket the parent kept listening), the port still ours.
        with pytest.raises(ConnectionRefusedError):
            _connect(held.port)
        with socket.socket() as other, pytest.raises(OSError, match="in use"):
            other.bind(("127.0.0.1", held.port))
        second = _start(held, "second")
        try:
            assert _connect(held.port) == b"second"
        finally:
            _stop(second)


def test_a_deadline_for_cpu_work_stretches_with_the_runnable_processes_per_core(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 0.0, 0.0))
    assert loaded_deadline(600) == 600
    monkeypatch.setattr(os, "getloadavg", lambda: (35.0, 0.0, 0.0))
    assert loaded_deadline(600) == 600 * 17.5
