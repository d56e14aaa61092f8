"""bench/receiver_capacity.py's clients connect the way the dispatchers do, one after another, and the rate counts
only the creates started once the last one has connected: clients connecting within a millisecond landed on
fewer gunicorn workers than the dispatchers and made the reference cheaper for the receiver."""

import base64
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench import receiver_capacity

SECRET = "whsec_" + base64.b64encode(b"0" * 32).decode()


class Created(BaseHTTPRequestHandler):
    """Answers every create 201 on a keep-alive connection."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class NotingAccepts(ThreadingHTTPServer):
    """Notes the monotonic time each connection was accepted."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Created)
        self.accepted: list[float] = []

    def get_request(self):
        request = super().get_request()
        self.accepted.append(time.monotonic())
        return request


def test_clients_connect_a_stagger_apart_and_the_ramp_is_not_counted():
    server = NotingAccepts()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/delivery/api"
        began = time.monotonic()
        measured = receiver_capacity.measure(url, SECRET, clients=3, seconds=1.0, stagger=0.5)
    finally:
        server.shutdown()
        server.server_close()

    # One connection a client, none before its turn (a client late on a busy machine only comes later).
    assert len(server.accepted) == 3
    for turn, accepted in enumerate(sorted(server.accepted)):
        assert accepted - began >= turn * 0.5
    assert measured["stagger_seconds"] == 0.5
    # The first two clients' creates before the third connected are sent but not counted.
    assert measured["created"] > measured["counted"] > 0
    assert measured["per_second"] == round(measured["counted"] / 1.0, 1)
