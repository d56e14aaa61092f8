"""The smtp kind: one e-mail per handoff through a real SMTP server, with Django's mail machinery.

Its contract. SMTP has no idempotency key and nothing can be asked about a message once sent
(`supports_idempotency` and `supports_lookup` are False), so the attempts table is the effect ledger:
`outbox/dispatch/claims.py` `claim_resend_blocked` sends nothing again automatically after an attempt that
may have reached the server, and an unknown outcome goes to a person (`outbox/outcomes.py`), who checks the
mailbox and settles it by hand. The Message-ID is derived from the action key (`message_id_for`): every
attempt of a handoff carries the same one, and a delivered handoff's task id is its Message-ID. Whether a
failure came before or after the message data went out is read by `smtp/session.py`.

Configuration keys: docs/destinations/smtp.md.
"""

import dataclasses
import hashlib
import os
import re
import string
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, get_connection
from django.core.validators import validate_email

from lib.telemetry import call_span, note, trace_headers
from outbox.destinations.base import Destination, LookupFailed, RemoteTask
from outbox.destinations.credentials.secret_places import read_env, secret_file
from outbox.destinations.smtp.session import Transcript, smtp_result
from outbox.failures import TASK_ID_MAX, DeliveryResult, Outgoing
from outbox.models import FailureClass
from outbox.retry import RetryPolicy

SECURITY = ("none", "starttls", "tls")
REQUIRED_KEYS = frozenset(
    {"name", "host", "port", "security", "from_address", "to", "subject", "body"}
)
OPTIONAL_KEYS = frozenset(
    {
        "username",
        "username_env",
        "password_env",
        "password_file",
        "timeout",
        "message_id_domain",
        "ca_file",
        "retry",
        "mail_settings_auth",
    }
)
DEFAULT_TIMEOUT = 10.0
_DOMAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,78}[A-Za-z0-9])?")
# The dotted path `get_connection` imports: Django's SMTP backend, its sessions recorded in a `Transcript`.
BACKEND = "outbox.destinations.smtp.session.TrackingEmailBackend"


def message_id_for(action_key: str, domain: str) -> str:
    """The Message-ID of the handoff with this key: the same for every attempt, unique per key."""
    return f"<{hashlib.sha256(action_key.encode()).hexdigest()[:32]}@{domain}>"


def is_message_id(task_id: str) -> bool:
    """Whether a delivered handoff's id at its destination is a Message-ID (`<…@domain>`): an e-mail step,
    whose effect is a message sent, not a task someone works on. The screens word it so."""
    return task_id.startswith("<") and task_id.endswith(">") and "@" in task_id


class Unsendable(ValueError):
    """The handoff cannot become a message (a payload field missing, an invalid address): permanent."""

    def __init__(self, reason_code: str, detail: str):
        super().__init__(detail)
        self.reason_code = reason_code


@dataclass(frozen=True)
class Secret:
    """Where a credential comes from: an environment variable or a file, read at each use (a rotated one is
    picked up without a restart)."""

    env: str = ""
    file: str = ""

    def read(self) -> str:
        """The value; ValueError naming where it should have come from when it is not there, or when a
        destination may not name that place (secret_places.py, checked again at each read)."""
        if self.env:
            value = read_env(self.env)
            if not value:
                raise ValueError(f"environment variable {self.env} is not set")
            return value
        try:
            value = secret_file(self.file).read_text().strip()
        except OSError as exc:
            raise ValueError(f"secrets file {self.file} cannot be read: {exc.strerror}") from exc
        if not value:
            raise ValueError(f"secrets file {self.file} is empty")
        return value


def _check_keys(config: dict) -> None:
    unknown = sorted(set(config) - REQUIRED_KEYS - OPTIONAL_KEYS)
    if unknown:
        raise ValueError(f"smtp destination: unknown configuration keys {', '.join(unknown)}")
    missing = sorted(REQUIRED_KEYS - set(config))
    if missing:
        raise ValueError(f"smtp destination: missing configuration keys {', '.join(missing)}")
    for key in ("name", "host", "from_address", "to", "subject", "body"):
        if not isinstance(config[key], str) or not config[key].strip():
            raise ValueError(f"smtp destination: {key} must be a non-empty text")
    if config["security"] not in SECURITY:
        raise ValueError(f"smtp destination: security must be one of {', '.join(SECURITY)}")
    port = config["port"]
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ValueError("smtp destination: port must be a number from 1 to 65535")


def _template(config: dict, key: str) -> string.Template:
    template = string.Template(config[key])
    if not template.is_valid():
        raise ValueError(f"smtp destination: {key} is not a valid template ($field or ${{field}})")
    return template


def _auth_sources(config: dict) -> tuple[str | Secret, Secret]:
    """Where the username and the password come from, one source each."""
    for one, other in (("username", "username_env"), ("password_env", "password_file")):
        if one in config and other in config:
            raise ValueError(f"smtp destination: give {one} or {other}, not both")
    username = config.get("username") or Secret(env=config.get("username_env", ""))
    password = Secret(env=config.get("password_env", ""), file=config.get("password_file", ""))
    return username, password


@dataclass(frozen=True)
class MailSettingsPassword:
    """The product's own mail server's password: EMAIL_HOST_PASSWORD, from the environment only, read at
    each use. Not a destination's variable (secret_places.py): only `mail_settings_auth` names it."""

    env: str = "EMAIL_HOST_PASSWORD"

    def read(self) -> str:
        value = os.environ.get(self.env, "")
        if not value:
            raise ValueError(f"environment variable {self.env} is not set")
        return value


def _mail_settings_credentials(config: dict) -> tuple[str, MailSettingsPassword]:
    """`mail_settings_auth`: log in to the product's mail server (EMAIL_HOST:EMAIL_PORT) as
    EMAIL_HOST_USER with EMAIL_HOST_PASSWORD. Bound to that server, so that no row (a destinations file's
    either) can send the product's mail password anywhere else, and never in clear."""
    where = "smtp destination: mail_settings_auth"
    if config["mail_settings_auth"] is not True:
        raise ValueError(f"{where} must be true or left out")
    if any(key in config for key in ("username", "username_env", "password_env", "password_file")):
        raise ValueError(f"{where} takes no username or password keys")
    if (config["host"], config["port"]) != (settings.EMAIL_HOST, settings.EMAIL_PORT):
        raise ValueError(f"{where} logs in only to EMAIL_HOST:EMAIL_PORT, not {config['host']}")
    if config["security"] == "none":
        raise ValueError(f"{where}: AUTH over security none would send the password in clear")
    username, password = os.environ.get("EMAIL_HOST_USER", ""), MailSettingsPassword()
    if not username:
        raise ValueError(f"{where}: environment variable EMAIL_HOST_USER is not set")
    password.read()
    return username, password


def _credentials(config: dict) -> tuple[str | Secret, Secret | MailSettingsPassword | None]:
    """The username (a text, or a Secret from the environment) and the password's Secret (None: no AUTH);
    each checked present now, so that an incomplete destination is refused when it is built."""
    if "mail_settings_auth" in config:
        return _mail_settings_credentials(config)
    username, password = _auth_sources(config)
    has_user = username != Secret()
    if has_user != (password != Secret()):
        raise ValueError("smtp destination: SMTP AUTH needs both a username and a password source")
    if not has_user:
        return "", None
    if config["security"] == "none":
        raise ValueError(
            "smtp destination: AUTH over security none would send the password in clear"
        )
    for secret in (username, password):
        _check_present(secret, config["name"])
    return username, password


def _check_present(secret: str | Secret, name: str) -> None:
    if isinstance(secret, Secret):
        try:
            secret.read()
        except ValueError as exc:
            raise ValueError(f"smtp destination {name}: {exc}") from exc


def _domain(config: dict) -> str:
    domain = config.get("message_id_domain") or config["from_address"].rpartition("@")[2]
    if not _DOMAIN.fullmatch(domain) or len(message_id_for("", domain)) > TASK_ID_MAX:
        raise ValueError(f"smtp destination: {domain!r} cannot be the domain of a Message-ID")
    return domain


def _timeout(config: dict) -> float:
    timeout = config.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError("smtp destination: timeout must be a positive number of seconds")
    return float(timeout)


def _retry_policy(config: dict) -> RetryPolicy:
    try:
        return RetryPolicy.from_config(config.get("retry"))
    except TypeError as exc:
        raise ValueError(f"smtp destination: retry: {exc}") from exc


def _ca_file(config: dict) -> str:
    ca_file = config.get("ca_file", "")
    if ca_file and not Path(ca_file).is_file():
        raise ValueError(f"smtp destination: ca_file {ca_file} does not exist")
    return ca_file


def _field(payload: dict, name: str) -> str:
    value = payload.get(name)
    if value is None:
        raise Unsendable("payload_field_missing", f"payload field {name!r} is missing")
    if isinstance(value, dict | list):
        raise Unsendable("payload_field_not_text", f"payload field {name!r} is not a text")
    return str(value)


def _fill(template: string.Template, payload: dict) -> str:
    return template.substitute({name: _field(payload, name) for name in template.get_identifiers()})


class SmtpDestination(Destination):
    """E-mail through an SMTP server: one message per handoff, to the address in a payload field (or the
    subject, text and address its step mapped and the approval froze)."""

    supports_idempotency = False
    supports_lookup = False
    supports_batch = False
    call_seconds_keys = ("timeout",)

    def __init__(self, config: dict):
        _check_keys(config)
        self.name, self.host, self.port = config["name"], config["host"], config["port"]
        self.security = config["security"]
        self.from_address, self.to_field = config["from_address"], config["to"]
        try:
            validate_email(self.from_address)
        except ValidationError as exc:
            raise ValueError(
                f"smtp destination: from_address {self.from_address!r} is not an address"
            ) from exc
        self.subject, self.body = _template(config, "subject"), _template(config, "body")
        self.username, self.password = _credentials(config)
        self.domain = _domain(config)
        self.timeout = _timeout(config)
        # The whole session ends within `timeout` (each read and write gets what is left of it).
        self.call_seconds = self.timeout
        self.ca_file = _ca_file(config)
        self.retry_policy = _retry_policy(config)

    @classmethod
    def from_config(cls, config: dict) -> "SmtpDestination":
        return cls(config)

    def describe(self) -> str:
        return f"{self.name}: e-mail through {self.host}:{self.port} ({self.security})"

    def message_id(self, action_key: str) -> str:
        return message_id_for(action_key, self.domain)

    def email_parts(self, outgoing: Outgoing) -> tuple[str, str, str]:
        """Subject, text and recipient: the e-mail frozen in the handoff at approval where its step maps one
        (`request` {"subject", "text", "to"}, never rendered again), else this destination's templates."""
        if outgoing.request is not None and "subject" in outgoing.request:
            frozen = outgoing.request
            return frozen["subject"], frozen["text"], frozen["to"]
        recipient = _field(outgoing.payload, self.to_field)
        return _fill(self.subject, outgoing.payload), _fill(self.body, outgoing.payload), recipient

    def _message(self, outgoing: Outgoing, message_id: str) -> EmailMessage:
        subject, text, recipient = self.email_parts(outgoing)
        try:
            validate_email(recipient)
        except ValidationError as exc:
            raise Unsendable(
                "recipient_invalid", f"the recipient {recipient!r} is not an e-mail address"
            ) from exc
        message = EmailMessage(
            subject=subject,
            body=text,
            from_email=self.from_address,
            to=[recipient],
            # The call's `traceparent` too (when tracing is on), for a mail system that traces what it takes.
            headers=trace_headers(
                {"Message-ID": message_id, "X-Handoff-Action-Key": outgoing.action_key}
            ),
        )
        try:
            message.message()  # a header that cannot be written (a line break in the subject) fails here
        except ValueError as exc:
            raise Unsendable("message_invalid", str(exc)) from exc
        return message

    def _login(self) -> tuple[str, str]:
        if self.password is None:
            return "", ""
        username = self.username.read() if isinstance(self.username, Secret) else self.username
        return username, self.password.read()

    def deliver(self, outgoing: Outgoing) -> DeliveryResult:
        with call_span(self.name, outgoing.action_key):
            result = self._deliver(outgoing)
            note(smtp_code=result.status_code or 0, failure_class=result.failure_class or "")
        return result

    def _deliver(self, outgoing: Outgoing) -> DeliveryResult:
        message_id = self.message_id(outgoing.action_key)
        try:
            message = self._message(outgoing, message_id)
        except Unsendable as exc:
            return DeliveryResult.failed(FailureClass.PERMANENT, exc.reason_code, str(exc))
        try:
            username, password = self._login()
        except ValueError as exc:
            return DeliveryResult.failed(FailureClass.CREDENTIAL, "credential_missing", str(exc))
        started = time.monotonic()
        transcript = Transcript(deadline=started + self.timeout)
        connection = get_connection(
            backend=BACKEND,
            fail_silently=False,
            host=self.host,
            port=self.port,
            username=username,
            password=password,
            use_tls=self.security == "starttls",
            use_ssl=self.security == "tls",
            timeout=self.timeout,
            transcript=transcript,
            ca_file=self.ca_file,
        )
        failure = None
        try:
            connection.send_messages([message])
        except (OSError, ValueError) as exc:
            failure = exc
        result = smtp_result(failure, transcript, message_id, outgoing, f"{self.host}:{self.port}")
        return _with_latency(result, started)

    def lookup(self, action_key: str) -> RemoteTask | None:
        raise LookupFailed("an SMTP server cannot be asked about a message: check the mailbox")

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        raise LookupFailed("an SMTP server cannot list the messages it took")


def _with_latency(result: DeliveryResult, started: float) -> DeliveryResult:
    return dataclasses.replace(result, latency_ms=int((time.monotonic() - started) * 1000))
