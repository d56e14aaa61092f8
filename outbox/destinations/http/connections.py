"""How an HTTP destination's requests leave this machine: pooled keep-alive connections, straight to the
receiver or through the egress proxy the environment names; and the answer, read whole."""

import ipaddress
from dataclasses import dataclass
from http.client import RemoteDisconnected
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies_environment, proxy_bypass_environment

import urllib3
from urllib3.connection import port_by_scheme
from urllib3.exceptions import ProtocolError
from urllib3.util import parse_url

from httpapi.strict_json import JSONRejected, parse_json
from outbox.destinations.http.answer_head import (
    HeadReadPool,
    HeadReadProxyManager,
    HeadReadTLSPool,
)

# What a request raises when the receiver closed its pooled keep-alive connection as the request went out (its
# idle timeout firing just then, as gunicorn does under load): no byte of an answer came back. urllib3 replaces
# a connection it sees closed before writing on it; one closed while the request crosses it is not seen.
CLOSED_BEFORE_ANSWER = (
    RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)


# Deeper than any receipt, lookup or listing a contract reads; the parser recurses once per level.
ANSWER_MAX_DEPTH = 64


class AnswerNotJSON(ValueError):
    """The answer's body is not strict JSON; the message says why (a key twice, NaN, ...)."""


@dataclass(frozen=True)
class Answer:
    """A receiver's answer, read whole."""

    status_code: int
    headers: object  # case-insensitive (urllib3's HTTPHeaderDict)
    content: bytes

    def json(self) -> object:
        """The body as strict JSON (`httpapi/strict_json.py`): a key given twice, NaN or Infinity is
        refused, never read as the last value or a float a later step cannot store or hash."""
        try:
            return parse_json(self.content, max_depth=ANSWER_MAX_DEPTH)
        except JSONRejected as exc:
            raise AnswerNotJSON(f"the answer is not strict JSON: {exc.detail}") from None

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url`, read as curl and requests read it (`HTTP_PROXY`,
    `HTTPS_PROXY`, `NO_PROXY`, upper or lower case), or None for a direct connection. A receiver on this
    machine (localhost, a loopback address) is always called directly, as Go's HTTP client does: a proxy
    set for the way out must not carry a local receiver's calls (the demo's, the tests', the bench's)."""
    proxies = getproxies_environment()
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme)
    if (
        not proxy
        or on_this_machine(parts.hostname or "")
        or proxy_bypass_environment(parts.netloc, proxies)
    ):
        return None
    return proxy


def on_this_machine(host: str) -> bool:
    """`localhost` or a loopback address: never proxied, and the one place plain http is accepted."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def without_credentials(url: str) -> str:
    """`url` without its user and password: what may be shown, stored or logged."""
    return str(parse_url(url)._replace(auth=None))


class Direct:
    """Keep-alive connections straight to the receiver; requests name a path. The pool is urllib3's
    (`urllib3.connection_from_url`'s), its answers' heads read without the email package (`answer_head.py`)."""

    def __init__(self, base_url: str, options: dict):
        parts = parse_url(base_url)
        scheme = parts.scheme or "http"
        pool = HeadReadTLSPool if scheme == "https" else HeadReadPool
        self.pool = pool(parts.host, port=parts.port or port_by_scheme.get(scheme, 80), **options)
        self.prefix = urlsplit(base_url).path

    def urlopen(self, method: str, path: str, **kw):
        return self.pool.urlopen(method, f"{self.prefix}{path}", **kw)

    def close(self) -> None:
        self.pool.close()


class Proxied:
    """Keep-alive connections through an HTTP proxy: a plain request goes to the proxy in absolute form, an
    HTTPS one through a CONNECT tunnel (urllib3's ProxyManager does both). A user and password in the proxy's
    URL become its Proxy-Authorization header, as curl and requests send it (urllib3 does not). Answers' heads
    are read without the email package (`answer_head.py`)."""

    def __init__(self, base_url: str, proxy: str, options: dict):
        auth = parse_url(proxy).auth
        headers = urllib3.make_headers(proxy_basic_auth=unquote(auth)) if auth else None
        self.manager = HeadReadProxyManager(
            without_credentials(proxy), proxy_headers=headers, num_pools=1, **options
        )
        self.prefix = base_url

    def urlopen(self, method: str, path: str, **kw):
        return self.manager.urlopen(method, f"{self.prefix}{path}", **kw)

    def close(self) -> None:
        self.manager.clear()


def closed_before_answer(exc: Exception) -> bool:
    """The connection was closed under the request before any byte of the answer (urllib3 wraps the cause)."""
    return isinstance(exc, ProtocolError) and any(
        isinstance(cause, CLOSED_BEFORE_ANSWER) for cause in exc.args
    )


def answer_of(
    connections: Direct | Proxied, method: str, path: str, *, repeatable: bool, **kw
) -> Answer:
    """The answer to one request, read whole. A request safe to repeat (a lookup, a listing) whose connection
    was closed before any byte of an answer is sent once more, on a fresh connection (urllib3 drops the closed
    one); any other failure, and any failure of a request that is not safe to repeat (a create: its outcome is
    then uncertain and settlement reads it), is raised."""
    try:
        response = connections.urlopen(method, path, preload_content=False, **kw)
    except ProtocolError as exc:
        if not (repeatable and closed_before_answer(exc)):
            raise
        response = connections.urlopen(method, path, preload_content=False, **kw)
    try:
        return Answer(status_code=response.status, headers=response.headers, content=response.data)
    finally:
        response.release_conn()
