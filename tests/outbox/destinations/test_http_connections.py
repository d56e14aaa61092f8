"""An egress proxy named in the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) carries the destination's calls,
as it would for curl: a real forwarding proxy in a thread, the real receiver API served by live_server.

Calls to this machine never go through a proxy, so the receiver is named `receiver.test`, a name that only the
proxy resolves (to this machine), as an egress proxy resolves the names of the outside world."""

import http.client
import http.server
import select
import socket
import threading
from urllib.parse import urlsplit

import pytest

from delivery import faults
from delivery.models import ReceiverTask
from outbox.destinations.http.connections import proxy_for
from outbox.destinations.http.destination import HttpDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.failures import Outgoing
from outbox.models import FailureClass, HandoffState
from tests.outbox.destinations.test_http_tls import SECRET, untrusted_https_port  # noqa: F401 (a fixture)

RECEIVER_NAME = "receiver.test"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")
UNSENT_HEADERS = {
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "transfer-encoding",
    "server",
    "date",
    "content-length",
}


class _ForwardingProxy(http.server.BaseHTTPRequestHandler):
    """Forwards absolute-form requests and opens CONNECT tunnels; every request line is kept in `server.seen`."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_CONNECT(self):
        self.server.seen.append(("CONNECT", self.path))
        self.server.authorizations.append(self.headers.get("Proxy-Authorization"))
        host, port = self.path.rsplit(":", 1)
        with socket.create_connection((resolve(host), int(port)), timeout=5) as upstream:
            self.send_response(200, "Connection established")
            self.end_headers()
            ends = [self.connection, upstream]
            while True:
                readable, _, _ = select.select(ends, [], [], 5)
                if not readable:
                    return
                for end in readable:
                    data = end.recv(65536)
                    if not data:
                        return
                    (upstream if end is self.connection else self.connection).sendall(data)

    def forward(self):
        self.server.seen.append((self.command, self.path))
        self.server.authorizations.append(self.headers.get("Proxy-Authorization"))
        target = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in UNSENT_HEADERS}
        upstream = http.client.HTTPConnection(resolve(target.hostname), target.port, timeout=10)
        try:
            upstream.request(
                self.command,
                target.path + (f"?{target.query}" if target.query else ""),
                body=body or None,
                headers=headers,
            )
            answer = upstream.getresponse()
            content = answer.read()
        finally:
            upstream.close()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in UNSENT_HEADERS:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = forward


def resolve(host: str) -> str:
    return "127.0.0.1" if host == RECEIVER_NAME else host


@pytest.fixture
def proxy():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ForwardingProxy)
    server.daemon_threads = True
    server.seen = []
    server.authorizations = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def environment(monkeypatch):
    """No proxy variable but those a test sets (lower-case ones would be read too)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.delenv("REQUEST_METHOD", raising=False)  # urllib ignores HTTP_PROXY under CGI
    return monkeypatch


def deliver_once(url: str, **options) -> tuple:
    """One delivery of a fixed handoff to `url` by a destination built now (the environment read now)."""
    destination = HttpDestination(
        url=url, signing_secret=SECRET, connect_timeout=5, read_timeout=5, **options
    )
    try:
        return destination.deliver(
            Outgoing(action_key="onboarding:7:1:1", payload={"a": 1}, payload_hash="h")
        ), destination
    finally:
        destination.close()


def proxy_url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_the_proxy_is_read_from_the_environment_and_no_proxy_is_honoured(environment):
    environment.setenv("HTTPS_PROXY", "http://egress.internal:3128")
    environment.setenv("NO_PROXY", "receiver.internal,.corp.example")
    assert proxy_for("https://tasks.example/api") == "http://egress.internal:3128"
    assert proxy_for("http://tasks.example/api") is None, "HTTPS_PROXY is for https URLs only"
    assert proxy_for("https://receiver.internal/api") is None
    assert proxy_for("https://a.corp.example:8443/api") is None


def test_a_receiver_on_this_machine_is_never_proxied(environment):
    environment.setenv("HTTP_PROXY", "http://egress.internal:3128")
    environment.setenv("HTTPS_PROXY", "http://egress.internal:3128")
    for url in (
        "http://127.0.0.1:8000/delivery/api",
        "https://localhost/delivery/api",
        "http://[::1]:8000/api",
        "http://127.0.0.2/api",
    ):
        assert proxy_for(url) is None, url
    assert proxy_for("http://10.0.0.1/api") == "http://egress.internal:3128"


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_delivery_and_a_lookup_go_through_the_http_proxy(
    environment, proxy, live_server, settings, make_handoff
):
    faults.reset()
    settings.RECEIVER_FAULTS = None
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, RECEIVER_NAME]
    environment.setenv("HTTP_PROXY", proxy_url(proxy))
    base = f"http://{RECEIVER_NAME}:{urlsplit(live_server.url).port}/delivery/api"
    destination = HttpDestination(url=base, read_timeout=5, connect_timeout=2)
    handoff = make_handoff()
    try:
        assert destination.proxy == proxy_url(proxy)
        assert (
            handoff_deliver(handoff_id=handoff.pk, destination=destination)
            == HandoffState.DELIVERED
        )
        found = destination.lookup(handoff.action_key)
    finally:
        destination.close()
    handoff.refresh_from_db()
    task = ReceiverTask.objects.get(action_key=handoff.action_key)
    assert handoff.destination_id == str(task.task_id)
    assert found is not None and found.task_id == str(task.task_id)
    assert proxy.seen[0] == ("POST", f"{base}/tasks")
    assert [method for method, _ in proxy.seen] == ["POST", "GET"], proxy.seen


def test_https_goes_through_a_connect_tunnel(environment, proxy, untrusted_https_port):  # noqa: F811
    """The tunnel reaches the receiver's TLS server, whose certificate is refused: nothing was sent."""
    environment.setenv("HTTPS_PROXY", proxy_url(proxy))
    result, destination = deliver_once(
        f"https://{RECEIVER_NAME}:{untrusted_https_port}/delivery/api"
    )
    assert proxy.seen == [("CONNECT", f"{RECEIVER_NAME}:{untrusted_https_port}")]
    assert (result.failure_class, result.reason_code) == (
        FailureClass.TRANSIENT,
        "connect_failed",
    ), result


def test_an_unreachable_proxy_is_a_failed_connect_not_an_unknown_outcome(environment, refused_port):
    environment.setenv("HTTP_PROXY", f"http://127.0.0.1:{refused_port}")
    result, _ = deliver_once(f"http://{RECEIVER_NAME}/delivery/api")
    assert (result.failure_class, result.reason_code) == (
        FailureClass.TRANSIENT,
        "connect_failed",
    ), result
    assert "proxy" in result.detail


def test_a_proxy_password_is_sent_as_proxy_authorization_and_never_shown(
    environment,
    proxy,
    untrusted_https_port,  # noqa: F811
):
    """urllib3 does not read credentials from the proxy's URL; curl and requests send them as Basic auth. The
    destination's shown proxy and a failure's detail carry no password."""
    import base64

    port = proxy.server_address[1]
    environment.setenv("HTTPS_PROXY", f"http://egress%40corp:s3cr%3At@127.0.0.1:{port}")
    result, destination = deliver_once(
        f"https://{RECEIVER_NAME}:{untrusted_https_port}/delivery/api"
    )
    assert proxy.authorizations == ["Basic " + base64.b64encode(b"egress@corp:s3cr:t").decode()]
    assert destination.proxy == f"http://127.0.0.1:{port}"
    assert "s3cr" not in result.detail and "s3cr" not in destination.describe()


def test_an_unreachable_proxy_failure_names_it_without_its_password(environment, refused_port):
    environment.setenv("HTTP_PROXY", f"http://user:hunter2@127.0.0.1:{refused_port}")
    result, _ = deliver_once(f"http://{RECEIVER_NAME}/delivery/api")
    assert result.reason_code == "connect_failed" and "127.0.0.1" in result.detail
    assert "hunter2" not in result.detail
