"""bench/harness.py notes how a run's keep-alive connections fell on the receiver's worker processes (the
outside check, bench/outside_check.py): the receiver's CPU a create depends on it (several connections on one
gunicorn worker cost it less a create than one on each of several), so a pair whose sides fell differently is
read with that in mind."""

import os
import socket
import subprocess
import sys
import time

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


def test_a_bench_sharing_a_receiver_can_say_how_its_connections_fell(tmp_path):
    """Fails on the code before: e2e's one-call pairs ran on a Bench given only the receiver's URL, and
    `receiver_placement` found no receiver process there (`make bench` stopped, 2026-12-07)."""
    owner, other = harness.Bench("own", tmp_path), harness.Bench("other", tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        owner.receiver_port = listener.getsockname()[1]
        owner.receiver_url = f"http://127.0.0.1:{owner.receiver_port}/delivery/api"
        # This process stands for gunicorn's master: its workers are its children (none here).
        owner.receiver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            assert owner.share_receiver(other) is other
            assert other.env["RECEIVER_URL"] == owner.receiver_url
            assert other.receiver is owner.receiver and other.receiver_port == owner.receiver_port
            with harness.receiver_placement(other) as placed:
                time.sleep(0.3)
        finally:
            owner.receiver.kill()
            owner.receiver.wait()
    assert placed["placement"] == []
