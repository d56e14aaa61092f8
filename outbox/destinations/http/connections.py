"""How an HTTP destination's requests leave this machine: pooled keep-alive connections, straight to the
receiver or through the egress proxy the environment names; and the answer, read whole."""

import ipaddress
import json
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies_environment, proxy_bypass_environment

import urllib3
from urllib3.util import parse_url


@dataclass(frozen=True)
class Answer:
    """A receiver's answer, read whole."""

    status_code: int
    headers: object  # case-insensitive (urllib3's HTTPHeaderDict)
    content: bytes

    def json(self):
        return json.loads(self.content)

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
    """Keep-alive connections straight to the receiver; requests name a path."""

    def __init__(self, base_url: str, options: dict):
        self.pool = urllib3.connection_from_url(base_url, **options)
        self.prefix = urlsplit(base_url).path

    def urlopen(self, method: str, path: str, **kw):
        return self.pool.urlopen(method, f"{self.prefix}{path}", **kw)

    def close(self) -> None:
        self.pool.close()


class Proxied:
    """Keep-alive connections through an HTTP proxy: a plain request goes to the proxy in absolute form, an
    HTTPS one through a CONNECT tunnel (urllib3's ProxyManager does both). A user and password in the proxy's
    URL become its Proxy-Authorization header, as curl and requests send it (urllib3 does not)."""

    def __init__(self, base_url: str, proxy: str, options: dict):
        auth = parse_url(proxy).auth
        headers = urllib3.make_headers(proxy_basic_auth=unquote(auth)) if auth else None
        self.manager = urllib3.ProxyManager(
            without_credentials(proxy), proxy_headers=headers, num_pools=1, **options
        )
        self.prefix = base_url

    def urlopen(self, method: str, path: str, **kw):
        return self.manager.urlopen(method, f"{self.prefix}{path}", **kw)

    def close(self) -> None:
        self.manager.clear()
