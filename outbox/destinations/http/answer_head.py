"""An answer's status line and header block, read without the email package.

http.client hands an answer's header block to `email.parser` (`http.client.parse_headers`), and urllib3 then
checks the parsed message for defects, reads its items back through the email policy and copies them into its
own case-insensitive `HTTPHeaderDict`: about a third of the dispatcher's CPU for a one-call handoff went there
(docs/destinations/http_client.md). Here the block is split into its fields straight into that
`HTTPHeaderDict`, through urllib3's public extension points only: a connection class (`ConnectionCls` of a pool
subclass) whose http.client answer class reads the head, and whose `getresponse` wraps it in urllib3's own
`HTTPResponse` as urllib3 does. Everything after the head (keep-alive, bodies by length or chunks, timeouts, the
CONNECT tunnel, TLS) is http.client's and urllib3's, unchanged.

The reading is strict where the email package is lenient: a continuation line (obs-fold, RFC 9112 section
5.2), a field without a colon, a name that is not a token (whitespace before the colon), or a CR or NUL inside
a line is refused as `MalformedHead`, an `http.client.HTTPException` as a header line too long or too many
headers already are; urllib3 raises each as `ProtocolError` (an outcome not known: the safe side). The email
package let such a block through with a logged warning, the fields after the bad line lost.
"""

import http.client
import re

from urllib3 import HTTPConnectionPool, HTTPHeaderDict, HTTPSConnectionPool, ProxyManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.response import HTTPResponse

# http.client's own bounds on a head (a line's length, the fields' count).
MAX_LINE = 65536
MAX_FIELDS = 100
END_OF_HEAD = (b"\r\n", b"\n", b"")
# RFC 9110 section 5.1: a field name is a token. Section 5.5: a value with a CR, LF or NUL is refused.
FIELD_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
FORBIDDEN_IN_VALUE = re.compile(r"[\x00\r\n]")


class MalformedHead(http.client.HTTPException):
    """The answer's header block is not well formed: what is wrong, and the line (shortened)."""


def read_fields(fp) -> list[tuple[str, str]]:
    """The header block's fields up to its empty line, in order, names as sent, values without the
    whitespace before them; `MalformedHead`, `http.client.LineTooLong` or `HTTPException` when refused."""
    fields = []
    while True:
        line = fp.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        if line in END_OF_HEAD:
            return fields
        if len(fields) >= MAX_FIELDS:
            raise http.client.HTTPException(f"got more than {MAX_FIELDS} headers")
        fields.append(field_of(line))


def field_of(line: bytes) -> tuple[str, str]:
    """One header line (its line end included) as its name and value."""
    text = line.decode("iso-8859-1")
    text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
    name, colon, value = text.partition(":")
    if not colon:
        raise MalformedHead(f"a header line without a colon: {text[:80]!r}")
    if not FIELD_NAME.fullmatch(name):
        what = "a continuation line (obs-fold)" if name[:1] in (" ", "\t") else "a bad field name"
        raise MalformedHead(f"{what}: {text[:80]!r}")
    if FORBIDDEN_IN_VALUE.search(value):
        raise MalformedHead(f"a CR, LF or NUL in a header value: {text[:80]!r}")
    # The value from its first character that is not whitespace, as http.client's email parser reads it.
    return name, value.lstrip(" \t")


class HeadReadAnswer(http.client.HTTPResponse):
    """http.client's answer with its head read by `read_fields` into urllib3's `HTTPHeaderDict` (the rest of
    `begin` is http.client's own, in the same order)."""

    def begin(self) -> None:
        if self.headers is not None:
            return
        while True:
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            read_fields(self.fp)  # a 100 Continue's own fields, skipped
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = HTTPHeaderDict(read_fields(self.fp))
        self._framing(status)

    def _framing(self, status: int) -> None:
        """Chunked or not, the length, and whether the connection closes after it: as http.client decides."""
        transfer_encoding = first(self.headers, "transfer-encoding")
        self.chunked = bool(transfer_encoding) and transfer_encoding.lower() == "chunked"
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()
        if status in (204, 304) or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0
        else:
            self.length = None if self.chunked else content_length(self.headers)
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True


def first(headers: HTTPHeaderDict, name: str) -> str | None:
    """The first value of a field sent more than once, as the email package's `get` gave it to http.client
    (`HTTPHeaderDict.get` joins them all)."""
    values = headers.getlist(name)
    return values[0] if values else None


def content_length(headers: HTTPHeaderDict) -> int | None:
    """Content-Length as http.client reads it: None when absent, not a number, or negative."""
    try:
        length = int(first(headers, "content-length") or "")
    except ValueError:
        return None
    return length if length >= 0 else None


class HeadReadMixin:
    """A urllib3 connection whose answers' heads are read by `HeadReadAnswer`; `getresponse` wraps the answer
    in urllib3's `HTTPResponse` with the options the request gave, as urllib3's own `getresponse` does, without
    re-reading the fields through the email package."""

    response_class = HeadReadAnswer
    _answer_options: tuple | None = None

    def request(self, method, url, body=None, headers=None, **options) -> None:
        self._answer_options = (method, url, options)
        super().request(method, url, body=body, headers=headers, **options)

    def getresponse(self) -> HTTPResponse:
        if self._answer_options is None:
            raise http.client.ResponseNotReady()
        (method, url, options), self._answer_options = self._answer_options, None
        self.sock.settimeout(self.timeout)
        shutdown = getattr(self.sock, "shutdown", None)
        answer = http.client.HTTPConnection.getresponse(self)
        return HTTPResponse(
            body=answer,
            headers=answer.headers,
            status=answer.status,
            version=answer.version,
            version_string=getattr(self, "_http_vsn_str", "HTTP/?"),
            reason=answer.reason,
            preload_content=options.get("preload_content", True),
            decode_content=options.get("decode_content", True),
            original_response=answer,
            enforce_content_length=options.get("enforce_content_length", True),
            request_method=method,
            request_url=url,
            sock_shutdown=shutdown,
        )


class HeadReadConnection(HeadReadMixin, HTTPConnection):
    pass


class HeadReadTLSConnection(HeadReadMixin, HTTPSConnection):
    pass


class HeadReadPool(HTTPConnectionPool):
    ConnectionCls = HeadReadConnection


class HeadReadTLSPool(HTTPSConnectionPool):
    ConnectionCls = HeadReadTLSConnection


POOLS_BY_SCHEME = {"http": HeadReadPool, "https": HeadReadTLSPool}


class HeadReadProxyManager(ProxyManager):
    """urllib3's ProxyManager (a plain request in absolute form, HTTPS through a CONNECT tunnel) whose pools
    read heads as above."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.pool_classes_by_scheme = POOLS_BY_SCHEME
