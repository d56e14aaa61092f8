"""The credentials of an `idempotency_key_http` destination: named in its configuration (an environment
variable or a secrets file), never held in it, read at each call so that a rotated token is used without
restarting the dispatchers.

Schemes: `none` (said explicitly), `bearer` (`Authorization: Bearer <token>`), `header` and `api_key` (a key
in a header the API names, such as `X-Api-Key`), `basic` (`Authorization: Basic`, a username and a password),
`oauth2_client_credentials` (a bearer token from the provider's token endpoint, kept until it expires:
`credentials/oauth2.py`). A secret that is missing (variable unset or empty, file unreadable or empty)
raises MissingSecret naming where it was looked for: the call is not made without it.
"""

import base64
from dataclasses import dataclass, field

from outbox.destinations.credentials.oauth2 import (
    AUTH_METHODS,
    TOKEN_FETCH_SECONDS,
    OAuth2ClientCredentials,
    TokenFailure,
    token_url_checked,
)
from outbox.destinations.credentials.secret_places import SecretPlaceRefused, read_env, secret_file
from outbox.destinations.http.fields import header_name
from outbox.models import FailureClass


class MissingSecret(Exception):
    """A secret the configuration names is not there; the message names the variable or file."""

    failure_class = FailureClass.CREDENTIAL
    reason_code = "credential_missing"
    retry_after = None


# What `Credentials.headers` and `renewed` raise instead of headers: each has the `failure_class`,
# `reason_code` and `retry_after` a call's result records, and a message naming places, never values.
CREDENTIAL_FAILURES = (MissingSecret, TokenFailure)


def check_keys(where: str, given: object, required: set[str], optional: set[str]) -> dict:
    """`given` as a dict with every required key and no other than the optional ones (ValueError naming them)."""
    if not isinstance(given, dict):
        raise ValueError(f"{where} must be an object, not {type(given).__name__}")
    unknown = sorted(set(given) - required - optional)
    missing = sorted(required - set(given))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}")
    if missing:
        raise ValueError(f"{where}: missing key(s) {', '.join(missing)}")
    return given


@dataclass(frozen=True)
class SecretSource:
    """Where one secret is read: an environment variable or a file (its content, trailing newline aside)."""

    what: str
    env: str | None = None
    file: str | None = None

    @classmethod
    def named(cls, where: str, what: str, config: dict, prefix: str) -> "SecretSource":
        env, file = config.get(f"{prefix}_env"), config.get(f"{prefix}_file")
        if (env is None) == (file is None):
            raise ValueError(f"{where}: name exactly one of {prefix}_env, {prefix}_file")
        value = env if env is not None else file
        if not isinstance(value, str) or not value:
            raise ValueError(
                f"{where}: {prefix}_{'env' if env else 'file'} must be a non-empty text"
            )
        return cls(what=what, env=env, file=file)

    @property
    def place(self) -> str:
        return f"environment variable {self.env}" if self.env else f"secrets file {self.file}"

    def _file_text(self) -> str:
        return secret_file(self.file).read_text(encoding="utf-8")

    def read(self) -> str:
        """The secret now; MissingSecret when it is not there, or not somewhere a destination may name
        (checked again here, not only when the destination was built: secret_places.py)."""
        try:
            value = read_env(self.env) if self.env else self._file_text()
        except SecretPlaceRefused as exc:
            raise MissingSecret(f"{self.what}: {exc}") from exc
        except OSError as exc:
            raise MissingSecret(
                f"{self.what}: {self.place} cannot be read ({exc.strerror})"
            ) from exc
        value = value.strip()
        if not value:
            raise MissingSecret(f"{self.what}: {self.place} is not set or empty")
        return value


@dataclass(frozen=True)
class Credentials:
    """The headers one scheme adds to each call, read from their sources at the moment of the call."""

    scheme: str
    header: str = "Authorization"
    token: SecretSource | None = None
    username: SecretSource | str | None = None
    password: SecretSource | None = None
    # oauth2_client_credentials: the token source (its cache lives as long as the destination built).
    oauth2: OAuth2ClientCredentials | None = field(default=None, compare=False)
    token_url: str = ""

    def headers(self) -> dict[str, str]:
        """The auth headers for a call now; one of CREDENTIAL_FAILURES when there are none."""
        if self.scheme == "none":
            return {}
        if self.scheme == "basic":
            username = self.username if isinstance(self.username, str) else self.username.read()
            pair = f"{username}:{self.password.read()}".encode()
            return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
        if self.oauth2 is not None:
            return {"Authorization": f"Bearer {self.oauth2.token()}"}
        token = self.token.read()
        return {self.header: f"Bearer {token}" if self.scheme == "bearer" else token}

    def renewed(self, sent: dict[str, str]) -> dict[str, str]:
        """After a 401 to a call made with the headers `sent`: the auth headers to repeat it with once, or {}
        when this scheme has nothing newer to offer (a static secret is read at each call already)."""
        if self.oauth2 is None:
            return {}
        refused = sent.get("Authorization", "").removeprefix("Bearer ")
        return {"Authorization": f"Bearer {self.oauth2.renew(refused)}"}

    @property
    def fetch_seconds(self) -> float:
        """The longest a call waits for its credentials: an OAuth2 token's fetch (none for a static secret)."""
        return TOKEN_FETCH_SECONDS if self.oauth2 is not None else 0.0

    def close(self) -> None:
        if self.oauth2 is not None:
            self.oauth2.close()

    def sources(self) -> list[SecretSource]:
        return [
            s for s in (self.token, self.username, self.password) if isinstance(s, SecretSource)
        ]

    def missing(self) -> list[str]:
        """What is missing now, each naming its variable or file ([] when every secret is there)."""
        problems = []
        for source in self.sources():
            try:
                source.read()
            except MissingSecret as exc:
                problems.append(str(exc))
        return problems

    def describe(self) -> str:
        if self.scheme == "none":
            return "no credentials"
        places = ", ".join(source.place for source in self.sources())
        if self.oauth2 is not None:
            return (
                f"OAuth2 client credentials from {places}, bearer token from {self.token_url} "
                "(kept until it expires; renewed once on a 401)"
            )
        if self.scheme == "api_key":
            return f"API key in header {self.header} from {places}"
        return f"{self.scheme} credentials from {places}"


_SCHEME_KEYS = {
    "none": (set(), set()),
    "bearer": (set(), {"token_env", "token_file"}),
    "header": ({"header"}, {"token_env", "token_file"}),
    "api_key": ({"header"}, {"key_env", "key_file"}),
    "oauth2_client_credentials": (
        {"token_url"},
        {
            "client_id",
            "client_id_env",
            "client_id_file",
            "client_secret_env",
            "client_secret_file",
            "scope",
            "audience",
            "auth_method",
        },
    ),
    "basic": (
        set(),
        {"username", "username_env", "username_file", "password_env", "password_file"},
    ),
}


def credentials_from_config(config: object) -> Credentials:
    """The credentials an `auth` object names: {"scheme": "bearer", "token_env": "CRM_TOKEN"}, ..."""
    scheme = config.get("scheme") if isinstance(config, dict) else None
    if scheme not in _SCHEME_KEYS:
        raise ValueError(f"auth.scheme must be one of {', '.join(_SCHEME_KEYS)}, not {scheme!r}")
    required, optional = _SCHEME_KEYS[scheme]
    check_keys("auth", config, {"scheme", *required}, optional)
    if scheme == "none":
        return Credentials(scheme="none")
    if scheme == "basic":
        return Credentials(
            scheme="basic",
            username=_username(config),
            password=SecretSource.named("auth", "basic password", config, "password"),
        )
    if scheme == "oauth2_client_credentials":
        return _oauth2(config)
    header = header_name("auth.header", config.get("header", "Authorization"))
    if header.lower() == "authorization" and scheme == "api_key":
        raise ValueError(
            "auth.header: an API key goes in a header of its own (bearer: scheme bearer)"
        )
    prefix, what = ("key", "API key") if scheme == "api_key" else ("token", f"{scheme} token")
    return Credentials(
        scheme=scheme,
        header=header,
        token=SecretSource.named("auth", what, config, prefix),
    )


def _oauth2(config: dict) -> Credentials:
    token_url = token_url_checked("auth.token_url", config["token_url"])
    auth_method = config.get("auth_method", "client_secret_post")
    if auth_method not in AUTH_METHODS:
        raise ValueError(f"auth.auth_method must be one of {', '.join(AUTH_METHODS)}")
    words = {}
    for key in ("scope", "audience"):
        value = config.get(key, "")
        if not isinstance(value, str) or value != value.strip() or "\n" in value:
            raise ValueError(f"auth.{key} must be a text on one line")
        words[key] = value
    client_id = _client_id(config)
    secret = SecretSource.named("auth", "OAuth2 client secret", config, "client_secret")
    return Credentials(
        scheme="oauth2_client_credentials",
        username=client_id,
        password=secret,
        token_url=token_url,
        oauth2=OAuth2ClientCredentials(
            token_url=token_url,
            client_id=client_id.read if isinstance(client_id, SecretSource) else lambda: client_id,
            client_secret=secret.read,
            auth_method=auth_method,
            **words,
        ),
    )


def _client_id(config: dict) -> SecretSource | str:
    if "client_id" in config:
        if {"client_id_env", "client_id_file"} & set(config):
            raise ValueError("auth: name exactly one of client_id, client_id_env, client_id_file")
        if not isinstance(config["client_id"], str) or not config["client_id"]:
            raise ValueError("auth.client_id must be a non-empty text")
        return config["client_id"]
    return SecretSource.named("auth", "OAuth2 client id", config, "client_id")


def _username(config: dict) -> SecretSource | str:
    if "username" in config:
        if {"username_env", "username_file"} & set(config):
            raise ValueError("auth: name exactly one of username, username_env, username_file")
        if not isinstance(config["username"], str) or not config["username"]:
            raise ValueError("auth.username must be a non-empty text")
        return config["username"]
    return SecretSource.named("auth", "basic username", config, "username")
