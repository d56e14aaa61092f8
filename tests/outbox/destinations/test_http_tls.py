"""An HTTPS receiver whose certificate is not trusted: nothing was sent, so the call is a failed connect
(transient, counted by the breaker), not an unknown outcome."""

import socket
import ssl
import subprocess
import threading

import pytest

from outbox.destinations.http.destination import HttpDestination
from outbox.failures import Outgoing
from outbox.models import FailureClass

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def untrusted_https_port(tmp_path):
    """A TLS server on localhost with a self-signed certificate, accepting connections until the test ends."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)  # so that the loop sees `stop`
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            with conn:
                try:
                    with context.wrap_socket(conn, server_side=True):
                        pass
                except (ssl.SSLError, OSError):
                    pass  # the client refused our certificate

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_an_untrusted_certificate_is_a_failed_connect_not_an_unknown_outcome(untrusted_https_port):
    destination = HttpDestination(
        url=f"https://127.0.0.1:{untrusted_https_port}/delivery/api",
        signing_secret=SECRET,
        connect_timeout=5,
        read_timeout=5,
    )
    try:
        result = destination.deliver(
            Outgoing(action_key="onboarding:7:1:1", payload={"a": 1}, payload_hash="h")
        )
    finally:
        destination.close()
    assert (result.failure_class, result.reason_code) == (
        FailureClass.TRANSIENT,
        "connect_failed",
    ), result
