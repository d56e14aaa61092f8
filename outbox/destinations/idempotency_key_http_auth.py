"""The credentials of an `idempotency_key_http` destination: named in its configuration (an environment
variable or a secrets file), never held in it, read at each call so that a rotated token is used without
restarting the dispatchers.

Schemes: `none` (said explicitly), `bearer` (`Authorization: Bearer <token>`), `header` (the token in a header
the API names, such as `X-Api-Key`), `basic` (`Authorization: Basic`, a username and a password). A secret
that is missing (variable unset or empty, file unreadable or empty) raises MissingSecret naming where it was
looked for: the call is not made without it.
"""

import base64
from dataclasses import dataclass

from outbox.destinations.http_fields import header_name
from outbox.destinations.secret_places import SecretPlaceRefused, read_env, secret_file


class MissingSecret(Exception):
    """A secret the configuration names is not there; the message names the variable or file."""


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

    def headers(self) -> dict[str, str]:
        """The auth headers for a call now; MissingSecret when a named secret is missing."""
        if self.scheme == "none":
            return {}
        if self.scheme == "basic":
            username = self.username if isinstance(self.username, str) else self.username.read()
            pair = f"{username}:{self.password.read()}".encode()
            return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
        token = self.token.read()
        return {self.header: f"Bearer {token}" if self.scheme == "bearer" else token}

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
        return f"{self.scheme} credentials from {places}"


_SCHEME_KEYS = {
    "none": (set(), set()),
    "bearer": (set(), {"token_env", "token_file"}),
    "header": ({"header"}, {"token_env", "token_file"}),
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
    header = header_name("auth.header", config.get("header", "Authorization"))
    return Credentials(
        scheme=scheme,
        header=header,
        token=SecretSource.named("auth", f"{scheme} token", config, "token"),
    )


def _username(config: dict) -> SecretSource | str:
    if "username" in config:
        if {"username_env", "username_file"} & set(config):
            raise ValueError("auth: name exactly one of username, username_env, username_file")
        if not isinstance(config["username"], str) or not config["username"]:
            raise ValueError("auth.username must be a non-empty text")
        return config["username"]
    return SecretSource.named("auth", "basic username", config, "username")
