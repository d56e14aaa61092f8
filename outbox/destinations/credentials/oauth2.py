"""OAuth2 client credentials (RFC 6749 section 4.4) for a destination: a bearer token asked of the provider's
token endpoint, kept in this process until shortly before it expires, shared by every worker of the process.

One fetch at a time: the first worker that finds no fresh token asks for one while the others wait for it
and then use it. A token the API refuses (401) is dropped by `renew`, which fetches another unless a worker
already has. The token is never written to the database and never put into a message: a refusal's detail
names the endpoint and the provider's `error` code (section 5.2), nothing it sent or received besides. A 429
or 503 with Retry-After holds the destination (its result carries the wait) and keeps this process from
asking the endpoint again until it ends.

The requests go out as the kind's own do (`http.connections`: urllib3, the same proxy rules, no redirect).
Why not a library: docs/destinations.md, "Why this OAuth2 client".
"""

import base64
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote_plus, urlencode, urlsplit

import urllib3
from django.conf import settings

from httpapi.strict_json import JSONRejected, parse_json
from outbox.destinations.http.answers import CALL_FAILURES, call_failure
from outbox.destinations.http.connections import (
    Direct,
    Proxied,
    on_this_machine,
    proxy_for,
    without_credentials,
)
from outbox.failures import (
    TOKEN_ENDPOINT_PREFIX,
    TOKEN_ENDPOINT_UNAVAILABLE_REASONS,
    parse_retry_after,
)
from outbox.models import FailureClass
from outbox.redaction import redact_text

# A token is taken as expired this long before its `expires_in` ends (a tenth of its life when that is
# shorter): a call that starts just before the end must still arrive with a token the API takes.
EXPIRY_MARGIN_SECONDS = 30.0
TOKEN_CONNECT_TIMEOUT = 2.0
TOKEN_READ_TIMEOUT = 5.0
# The longest a fetch can take: a call that needs a new token takes this much more (`lease_rule.py`).
TOKEN_FETCH_SECONDS = TOKEN_CONNECT_TIMEOUT + TOKEN_READ_TIMEOUT
# A token answer is one flat object (section 5.1); the parser recurses once per level.
TOKEN_MAX_DEPTH = 8
AUTH_METHODS = ("client_secret_post", "client_secret_basic")
# Reason codes of the token endpoint's failures are its own (`token_endpoint_connect_failed`,
# `token_endpoint_http_503`, ...: outbox/failures.py), never the API's: a pause says which one is down.
TOKEN_ENDPOINT_UNAVAILABLE = f"{TOKEN_ENDPOINT_PREFIX}unavailable"


class TokenFailure(Exception):
    """No token for a call now; the message says why (never a secret). `failure_class` and `reason_code` are
    what the call's result records."""

    failure_class = FailureClass.CREDENTIAL
    reason_code = "token_refused"
    # Seconds the token endpoint asked to be left alone (its Retry-After on a 429 or 503), None when it asked
    # nothing: the call's result carries it, and the whole destination is held as for the API's own answer.
    retry_after: float | None = None


class TokenRefused(TokenFailure):
    """The token endpoint refused this client (invalid_client, unauthorized_client, ...): a person must fix
    the client's registration or secret; the destination pauses."""


class TokenUnavailable(TokenFailure):
    """The token endpoint could not be reached or did not answer: nothing reached the API, try again later."""

    failure_class = FailureClass.TRANSIENT

    def __init__(
        self,
        message: str,
        reason_code: str = TOKEN_ENDPOINT_UNAVAILABLE,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.reason_code = reason_code
        self.retry_after = retry_after


def token_url_checked(where: str, value: object) -> str:
    """An absolute token endpoint URL: https, or http to this machine only; no user, password or fragment."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where} must be an absolute https:// URL")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{where} must be an absolute https:// URL, not {value!r}")
    if parts.scheme == "http" and not on_this_machine(parts.hostname):
        raise ValueError(f"{where} must be https:// (http:// only to this machine's loopback)")
    if parts.username or parts.password or parts.fragment:
        raise ValueError(f"{where}: no user, password or fragment in the URL")
    return value


@dataclass(frozen=True)
class _Token:
    value: str
    fresh_until: float  # time.monotonic(); inf when the endpoint named no lifetime


class OAuth2ClientCredentials:
    """The token source of one destination. `client_id` and `client_secret` are callables reading the secret
    at the moment of a fetch (a rotated secret is used by the next fetch), raising when it is not there."""

    def __init__(
        self,
        *,
        token_url: str,
        client_id,
        client_secret,
        auth_method: str,
        scope: str = "",
        audience: str = "",
    ):
        self.token_url = token_url
        self._client_id = client_id
        self._client_secret = client_secret
        self.auth_method = auth_method
        self.scope = scope
        self.audience = audience
        self._token: _Token | None = None
        self._fetching = threading.Lock()
        # (until, time.monotonic(); the endpoint's words; its reason code) of its last Retry-After.
        self._asked_to_wait: tuple[float, str, str] | None = None
        self._pool: Direct | Proxied | None = None
        self.fetches = 0

    def token(self) -> str:
        """A token fresh now, fetched when there is none (one fetch at a time in the process)."""
        token = self._token
        if token is not None and time.monotonic() < token.fresh_until:
            return token.value
        with self._fetching:
            token = self._token
            if token is not None and time.monotonic() < token.fresh_until:
                return token.value  # another worker fetched it while this one waited
            self._token = None
            self._token = self._fetch_unless_asked_to_wait()
            return self._token.value

    def renew(self, refused: str) -> str:
        """A token other than `refused` (which the API answered 401 to): the one another worker has fetched
        since, or a new one."""
        with self._fetching:
            if self._token is not None and self._token.value == refused:
                self._token = None
        return self.token()

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _connections(self) -> Direct | Proxied:
        if self._pool is None:
            parts = urlsplit(self.token_url)
            origin = f"{parts.scheme}://{parts.netloc}"
            options = {
                "maxsize": 2,
                "block": False,
                "retries": False,
                "timeout": urllib3.Timeout(connect=TOKEN_CONNECT_TIMEOUT, read=TOKEN_READ_TIMEOUT),
            }
            proxy = proxy_for(origin)
            self._pool = Proxied(origin, proxy, options) if proxy else Direct(origin, options)
        return self._pool

    def _request(self) -> tuple[str, dict[str, str]]:
        """The form body and headers of a token request (section 4.4.2, client authentication 2.3.1)."""
        client_id, secret = self._client_id(), self._client_secret()
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        if self.audience:
            form["audience"] = self.audience
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        if self.auth_method == "client_secret_basic":
            # Section 2.3.1: each part form-encoded before the Basic encoding.
            pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
            headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
        else:
            form.update(client_id=client_id, client_secret=secret)
        return urlencode(form), headers

    def _fetch_unless_asked_to_wait(self) -> _Token:
        """A fetch, unless the endpoint's last Retry-After (capped as a destination hold) is still running: then
        the same failure with the wait left, nothing asked. The destination's hold keeps this process's
        deliveries away; this keeps away what the hold does not stop (lookups, probes, a worker that took its
        permit before the hold was written)."""
        waited = self._asked_to_wait
        if waited is not None and (left := waited[0] - time.monotonic()) > 0:
            raise TokenUnavailable(f"{waited[1]}; {left:.0f} s left", waited[2], left)
        try:
            return self._fetch()
        except TokenUnavailable as exc:
            if exc.retry_after:
                wait = min(exc.retry_after, settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS)
                self._asked_to_wait = (time.monotonic() + wait, str(exc), exc.reason_code)
            raise

    def _fetch(self) -> _Token:
        body, headers = self._request()
        parts = urlsplit(self.token_url)
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        where = f"token endpoint {without_credentials(self.token_url)}"
        started = time.monotonic()
        try:
            answer = self._connections().urlopen(
                "POST",
                path,
                body=body.encode(),
                headers=headers,
                retries=False,
                redirect=False,
                preload_content=True,
            )
        except CALL_FAILURES as exc:
            # A token request creates nothing: whatever happened to it, it can be asked again.
            failed = call_failure(exc, proxy=None)
            reason = f"{TOKEN_ENDPOINT_PREFIX}{failed.reason_code}"
            if reason not in TOKEN_ENDPOINT_UNAVAILABLE_REASONS:
                reason = TOKEN_ENDPOINT_UNAVAILABLE
            raise TokenUnavailable(f"{where} not reachable: {failed.detail}", reason) from exc
        self.fetches += 1
        return _token_from(answer.status, answer.data, where, started, answer.headers)


def _token_from(status: int, data: bytes, where: str, started: float, headers) -> _Token:
    """The token of a 200 answer (section 5.1); TokenRefused or TokenUnavailable for any other. A 429 or 503
    with `Retry-After` (seconds, or a date on the endpoint's own `Date`) says how long to leave it alone."""
    try:
        body, not_json = parse_json(data, max_depth=TOKEN_MAX_DEPTH), ""
    except JSONRejected as exc:
        body, not_json = None, exc.detail
    fields = body if isinstance(body, dict) else {}
    if status == 429 or status >= 500:
        wait = None
        if status in (429, 503):
            wait = parse_retry_after(headers.get("Retry-After"), date=headers.get("Date"))
        asked = f" with Retry-After {wait:g} s" if wait is not None else ""
        code = f"{TOKEN_ENDPOINT_PREFIX}http_{status}"
        raise TokenUnavailable(f"{where} answered HTTP {status}{asked}", code, wait)
    if status != 200:
        raise _refusal(status, fields, where)
    if not_json:
        # An `expires_in` of NaN or Infinity would keep a token for ever; a key twice, a token nobody chose.
        raise TokenRefused(redact_text(f"{where} answered 200, not strict JSON: {not_json}"))
    value = _bearer(fields, where)
    lifetime = _lifetime(fields.get("expires_in"))
    if lifetime is None:
        # No lifetime named (section 5.1 makes it optional): kept until the API refuses it.
        return _Token(value, float("inf"))
    return _Token(value, started + lifetime - min(EXPIRY_MARGIN_SECONDS, lifetime / 10))


def _bearer(fields: dict, where: str) -> str:
    value, kind = fields.get("access_token"), fields.get("token_type")
    if not isinstance(value, str) or not value or not isinstance(kind, str):
        raise TokenRefused(f"{where} answered 200 without an access_token and token_type")
    if kind.lower() != "bearer":
        raise TokenRefused(f"{where} issued a {kind[:40]!r} token; only bearer tokens are sent")
    return value


def _refusal(status: int, fields: dict, where: str) -> TokenRefused:
    """A section 5.2 error answer, worded with its `error` code and description (the provider's words)."""
    error, described = fields.get("error"), fields.get("error_description")
    named = f" {error[:60]}" if isinstance(error, str) else ""
    why = f": {described[:200]}" if isinstance(described, str) else ""
    return TokenRefused(redact_text(f"{where} refused the client (HTTP {status}{named}){why}"))


def _lifetime(value: object) -> float | None:
    """`expires_in` in seconds (a number, or digits as some providers send it); None when not usable."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)
