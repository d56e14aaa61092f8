"""An answer's header block read without the email package (`outbox/destinations/http/answer_head.py`): the same
fields as http.client reads for any well-formed block (hypothesis), a malformed one refused, and the answers of a
real socket server read through the destination's pools: framing, keep-alive and case-insensitive fields as
before, a malformed head an outcome not known."""

import http.client
import io
import socket
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from urllib3.exceptions import ProtocolError

from outbox.destinations.http.answer_head import MAX_FIELDS, MalformedHead, read_fields
from outbox.destinations.http.answers import call_failure
from outbox.destinations.http.connections import Direct, answer_of
from outbox.models import FailureClass

TOKEN = st.text(
    alphabet="!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    min_size=1,
)
# Visible characters, obs-text and spaces or tabs inside (RFC 9110 section 5.5), as iso-8859-1 reads them.
VALUE = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"),
    max_size=40,
)
WHITESPACE = st.text(alphabet=" \t", max_size=3)
FIELDS = st.lists(st.tuples(TOKEN, WHITESPACE, VALUE), max_size=30)
END = st.sampled_from([b"\r\n", b"\n"])


def block(fields, end: bytes = b"\r\n") -> bytes:
    return (
        b"".join(
            f"{name}:{space}{value}".encode("iso-8859-1") + end for name, space, value in fields
        )
        + end
    )


def stdlib_fields(data: bytes) -> list[tuple[str, str]]:
    return http.client.parse_headers(io.BytesIO(data)).items()


@given(FIELDS, END)
def test_a_well_formed_block_reads_as_http_client_reads_it(fields, end):
    data = block(fields, end) + b"the body, not read"
    assert read_fields(io.BytesIO(data)) == stdlib_fields(data)


BAD_LINES = {
    "continuation": b" folded onto the field above\r\n",
    "tab continuation": b"\tfolded onto the field above\r\n",
    "no colon": b"X-No-Colon here\r\n",
    "space before the colon": b"Retry-After : 5\r\n",
    "bare CR in a value": b"X-A: one\rtwo\r\n",
    "bare CR at the end": b"X-A: one\r\r\n",
    "NUL in a value": b"X-A: one\x00two\r\n",
    "not a token": b"X(a): 1\r\n",
    "empty name": b": 1\r\n",
}


@pytest.mark.parametrize("bad", BAD_LINES.values(), ids=BAD_LINES.keys())
@given(before=FIELDS, after=FIELDS)
def test_a_malformed_line_anywhere_is_refused(bad, before, after):
    data = block(before)[:-2] + bad + block(after)
    with pytest.raises(MalformedHead):
        read_fields(io.BytesIO(data))


def test_the_bounds_are_http_clients():
    fields = [("X-F", str(n), "") for n in range(MAX_FIELDS)]
    assert len(read_fields(io.BytesIO(block(fields)))) == MAX_FIELDS
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        read_fields(io.BytesIO(block([*fields, ("X-G", "", "1")])))
    with pytest.raises(http.client.LineTooLong):
        read_fields(io.BytesIO(b"X-Long: " + b"a" * 70000 + b"\r\n\r\n"))


class ScriptedServer:
    """A socket server answering each request it reads (head, and a body of its Content-Length) with the next of
    `answers`, raw bytes; counts the connections it accepted."""

    def __init__(self, answers: list[bytes]):
        self.answers = list(answers)
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with conn, reader:
            while self.answers:
                if not reader.readline():
                    return
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    length = int(value) if name.lower() == b"content-length" else length
                reader.read(length)
                conn.sendall(self.answers.pop(0))

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve(monkeypatch):
    """Scripted servers, and http.client's email-package reading of a head made to fail: the answers below must
    be read without it."""

    def refused(*args, **kwargs):
        raise AssertionError("an answer's head was read through the email package")

    monkeypatch.setattr(http.client, "parse_headers", refused)
    servers = []

    def start(*answers: bytes) -> ScriptedServer:
        servers.append(ScriptedServer(list(answers)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def connections(server: ScriptedServer) -> Direct:
    return Direct(server.url, {"maxsize": 1, "block": False, "retries": False, "timeout": 5})


def test_fields_read_case_insensitively_and_repeated_ones_joined(serve):
    server = serve(
        b"HTTP/1.1 429 Too Many Requests\r\nretry-after:   7\r\nX-RateLimit-Remaining: 0\r\n"
        b"Set-Thing: a\r\nset-thing: b\r\nContent-Length: 2\r\n\r\n{}"
    )
    answer = answer_of(connections(server), "POST", "/tasks", repeatable=False, body=b"{}")
    assert (answer.status_code, answer.content) == (429, b"{}")
    assert answer.headers.get("Retry-After") == "7"
    assert answer.headers["x-ratelimit-remaining"] == "0"
    assert answer.headers["SET-THING"] == "a, b"


def test_answers_framed_as_http_client_frames_them_on_one_kept_alive_connection(serve):
    server = serve(
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n',
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\nX-Skipped: 1\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n[]",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n[1]",
    )
    pool = connections(server)
    answers = [answer_of(pool, "GET", "/", repeatable=True) for _ in range(4)]
    assert [(a.status_code, a.content) for a in answers] == [
        (200, b'{"a":1}'),
        (204, b""),
        (201, b"[]"),
        (200, b"[1]"),
    ]
    assert "X-Skipped" not in answers[2].headers
    assert server.connections == 1


def test_a_malformed_head_is_an_outcome_not_known(serve):
    server = serve(
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n folded\r\nContent-Length: 2\r\n\r\n{}"
    )
    with pytest.raises(ProtocolError) as raised:
        answer_of(connections(server), "POST", "/tasks", repeatable=False, body=b"{}")
    assert isinstance(raised.value.args[1], MalformedHead)
    failure = call_failure(raised.value, proxy=None)
    assert (failure.failure_class, failure.reason_code) == (
        FailureClass.UNCERTAIN,
        "connection_lost",
    )
