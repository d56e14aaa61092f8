"""bench/harness.py notes how a run's keep-alive connections fell on the receiver's worker processes (the
outside check, bench/outside_check.py): the receiver's CPU a create depends on it (several connections on one
gunicorn worker cost it less a create than one on each of several), so a pair whose sides fell differently is
read with that in mind."""

import os
import socket
import sys

import pytest

from bench import harness

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_connections_held_counts_the_accepted_ends_on_the_port_per_process():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        accepted = [listener.accept()[0] for _ in clients]
        try:
            # The clients' ends are in this process too, but their local port is another: not counted.
            assert harness.connections_held([os.getpid()], port) == [3]
            accepted[0].close()
            assert harness.connections_held([os.getpid()], port) == [2]
            assert harness.connections_held([os.getppid()], port) == []
        finally:
            for sock in clients + accepted:
                sock.close()
