"""Header names, header values and paths as a destination's configuration may give them: only what HTTP
allows (RFC 9110) and only what cannot change where, or as what, a request arrives.

A CR or LF in a header splits the request (a second header or request the file's author chose); `Host`
sends the call to another virtual host; a hop-by-hop header or Content-Length changes how the message is
framed on the way; a path that starts with `//`, has a scheme or climbs with `..` leaves the destination's
base URL. Each is refused with a ValueError naming the field.
"""

import re
from urllib.parse import unquote, urljoin, urlsplit

from lib.json_config import json_path

# RFC 9110 5.1: a field name is a token, one or more tchar.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# RFC 9110 5.5: field-vchar (VCHAR, obs-text) with spaces and tabs inside, none at either end; no control
# (C0, DEL, C1), so no CR, LF or NUL.
_FIELD_VALUE = re.compile(r"[\x21-\x7e\xa0-\xff]([\t\x20-\x7e\xa0-\xff]*[\x21-\x7e\xa0-\xff])?")
# Headers that route or frame the message (RFC 9110 7.2, 7.6.1, 8.6; RFC 9112 6.1), set by the client
# library or by nobody: never by a configuration. Proxy-* too (any name starting so).
FRAMING_HEADERS = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
_CONTROL = re.compile(r"[\x00-\x20\x7f-\x9f]")


def header_name(where: str, value: object, *, sent: bool = True) -> str:
    """A header name the configuration gives; `sent` for one we send (not only read from an answer)."""
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise ValueError(f"{where}: not an HTTP token (RFC 9110 field name): {value!r}")
    lowered = value.lower()
    if sent and (lowered in FRAMING_HEADERS or lowered.startswith("proxy-")):
        raise ValueError(f"{where}: routes or frames the request and cannot be set")
    return value


def header_value(where: str, value: object) -> str:
    if not isinstance(value, str) or not _FIELD_VALUE.fullmatch(value):
        raise ValueError(
            f"{where}: not an HTTP field value (no CR, LF, NUL or other control, "
            f"no space at either end): {value!r}"
        )
    return value


def static_headers(where: str, config: dict) -> dict[str, str]:
    """An object of headers, each name and value checked, named `headers["X-Team"]` in a refusal."""
    for name, value in config.items():
        field = json_path((where, name))
        header_name(field, name)
        header_value(field, value)
    return dict(config)


def relative_path(where: str, value: str, base_url: str) -> str:
    """A path under `base_url` ("/v1/accounts?x={key}"): it starts with one "/", has no scheme, no ".."
    segment (percent-encoded or not), no backslash, no control or space, and resolves to the base's own
    scheme, host and port."""
    if not value.startswith("/") or value.startswith("//"):
        raise ValueError(f"{where} must start with '/' and not '//' (a path under url): {value!r}")
    path = value.split("?", 1)[0]
    if "\\" in value or _CONTROL.search(value) or _CONTROL.search(unquote(value)):
        raise ValueError(f"{where}: no backslash, space or control character: {value!r}")
    if ".." in unquote(path).split("/") or urlsplit(value).scheme:
        raise ValueError(f"{where}: a path under url, without '..' segments: {value!r}")
    base, resolved = urlsplit(base_url), urlsplit(urljoin(base_url, value))
    if (resolved.scheme, resolved.hostname, resolved.port) != (
        base.scheme,
        base.hostname,
        base.port,
    ):
        raise ValueError(f"{where}: resolves outside {base_url}: {value!r}")
    return value
