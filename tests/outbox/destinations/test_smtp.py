"""The smtp kind on its own: its configuration, and what each SMTP answer means, against a real SMTP server
(aiosmtpd in a process of its own, `smtp_server.py`) whose faults each test switches."""

import pytest

from outbox.destinations import LookupFailed
from outbox.destinations.registry import DestinationInvalid, destination_from_config
from outbox.destinations.smtp.destination import SmtpDestination, message_id_for
from outbox.failures import Outgoing
from outbox.models import FailureClass
from outbox.payloads import payload_hash
from tests.outbox.destinations.smtp_server import SmtpServer, make_certificate

KEY = "onboarding:7:42:1:send_welcome_pack"
PAYLOAD = {
    "client_name": "Northwind Traders",
    "contact_email": "ops@northwind.example",
    "plan": "gold",
}
PASSWORD_ENV = "HANDOFF_DEST_K2_TEST_SMTP_PASSWORD"


def config(port: int, **overrides) -> dict:
    return {
        "name": "mail",
        "host": "127.0.0.1",
        "port": port,
        "security": "none",
        "from_address": "welcome@handoff.example",
        "to": "contact_email",
        "subject": "Welcome, ${client_name}",
        "body": "Hello $client_name,\nyour $plan plan is ready.\n",
        "timeout": 5,
        **overrides,
    }


def outgoing(key: str = KEY, payload: dict | None = None) -> Outgoing:
    payload = dict(PAYLOAD if payload is None else payload)
    return Outgoing(action_key=key, payload=payload, payload_hash=payload_hash(payload))


@pytest.fixture
def server(tmp_path):
    server = SmtpServer(tmp_path / "smtp")
    yield server
    server.stop()


@pytest.fixture
def mail(server) -> SmtpDestination:
    return SmtpDestination.from_config(config(server.port))


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("smtp-tls"))


# --- configuration ------------------------------------------------------------------------------------


def test_unknown_configuration_keys_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown configuration keys recipient_field, subjekt"):
        SmtpDestination.from_config(config(25, subjekt="x", recipient_field="to"))


def test_missing_configuration_keys_are_refused_by_name():
    incomplete = {k: v for k, v in config(25).items() if k not in ("from_address", "to")}
    with pytest.raises(ValueError, match="missing configuration keys from_address, to"):
        SmtpDestination.from_config(incomplete)


def test_a_missing_password_variable_is_refused_by_name(monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    with pytest.raises(ValueError, match=f"environment variable {PASSWORD_ENV} is not set"):
        SmtpDestination.from_config(
            config(587, security="starttls", username="mailer", password_env=PASSWORD_ENV)
        )


def test_a_missing_password_file_is_refused_by_name(tmp_path, settings):
    settings.HANDOFF_SECRETS_DIR = tmp_path
    missing = tmp_path / "smtp-password"
    with pytest.raises(ValueError, match=f"secrets file {missing} cannot be read"):
        SmtpDestination.from_config(
            config(587, security="starttls", username="mailer", password_file=str(missing))
        )


def test_auth_without_tls_is_refused_rather_than_sending_the_password_in_clear(monkeypatch):
    monkeypatch.setenv(PASSWORD_ENV, "s3cret")
    with pytest.raises(ValueError, match="in clear"):
        SmtpDestination.from_config(config(25, username="mailer", password_env=PASSWORD_ENV))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"security": "ssl"}, "security must be one of none, starttls, tls"),
        ({"port": "25"}, "port must be a number"),
        ({"subject": "Welcome $"}, "subject is not a valid template"),
        ({"from_address": "not an address"}, "from_address 'not an address' is not an address"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"retry": {"max_attemps": 3}}, "max_attemps"),
        ({"username": "mailer"}, "needs both a username and a password source"),
    ],
)
def test_invalid_values_are_refused_saying_which(overrides, message):
    with pytest.raises(ValueError, match=message):
        SmtpDestination.from_config({**config(25), **overrides})


def test_the_registry_builds_the_smtp_kind_and_names_what_it_refuses():
    built = destination_from_config({"kind": "smtp", **config(2525)})
    assert isinstance(built, SmtpDestination)
    assert (built.supports_idempotency, built.supports_lookup) == (False, False)
    with pytest.raises(
        DestinationInvalid, match="'mail' \\(smtp\\): .*unknown configuration keys url"
    ):
        destination_from_config({"kind": "smtp", **config(2525, url="http://x")})


def test_the_message_id_is_derived_from_the_action_key_stable_and_distinct_per_key():
    mail = SmtpDestination.from_config(config(25))
    assert mail.message_id(KEY) == mail.message_id(KEY) == message_id_for(KEY, "handoff.example")
    assert mail.message_id(KEY) != mail.message_id(KEY + "x")
    assert mail.message_id(KEY).endswith("@handoff.example>")
    other_domain = SmtpDestination.from_config(config(25, message_id_domain="mail.corp.example"))
    assert other_domain.message_id(KEY).endswith("@mail.corp.example>")


# --- what the server's answers mean --------------------------------------------------------------------


def test_a_250_after_data_is_delivered_with_the_message_id_as_task_id(server, mail):
    result = mail.deliver(outgoing())
    assert result.delivered and result.created
    assert result.task_id == mail.message_id(KEY) and result.status_code == 250
    (message,) = server.messages()
    assert message["Message-ID"] == mail.message_id(KEY)
    assert message["X-Handoff-Action-Key"] == KEY
    assert message["X-Envelope-To"] == PAYLOAD["contact_email"]
    assert message["Subject"] == "Welcome, Northwind Traders"
    assert (
        message.get_payload().replace("\r\n", "\n")
        == "Hello Northwind Traders,\nyour gold plan is ready.\n"
    )


def test_a_missing_payload_field_is_permanent_and_named_and_nothing_is_sent(server, mail):
    for missing in ("contact_email", "plan"):
        payload = {k: v for k, v in PAYLOAD.items() if k != missing}
        result = mail.deliver(outgoing(payload=payload))
        assert (result.failure_class, result.reason_code) == (
            FailureClass.PERMANENT,
            "payload_field_missing",
        )
        assert repr(missing) in result.detail
    assert server.messages() == []


def test_a_recipient_that_is_no_address_or_a_header_with_a_line_break_is_permanent(server, mail):
    bad_address = mail.deliver(outgoing(payload={**PAYLOAD, "contact_email": "ops at northwind"}))
    assert bad_address.reason_code == "recipient_invalid"
    injected = mail.deliver(outgoing(payload={**PAYLOAD, "client_name": "X\nBcc: all@example.com"}))
    assert (injected.failure_class, injected.reason_code) == (
        FailureClass.PERMANENT,
        "message_invalid",
    )
    assert server.messages() == []


@pytest.mark.parametrize(
    ("faults", "failure_class", "reason_code", "status"),
    [
        ({"rcpt": "550 5.1.1 no such mailbox"}, FailureClass.PERMANENT, "recipient_refused", 550),
        ({"rcpt": "451 4.3.0 try again later"}, FailureClass.TRANSIENT, "smtp_451", 451),
        ({"mail": "421 4.3.2 shutting down"}, FailureClass.TRANSIENT, "smtp_421", 421),
        ({"mail": "553 5.7.1 sender not allowed"}, FailureClass.PERMANENT, "sender_refused", 553),
        (
            {"mail": "530 5.7.0 authentication required"},
            FailureClass.CREDENTIAL,
            "credential_rejected",
            530,
        ),
        # Answered after the data: the server says it did not take the message (RFC 5321 4.2.5).
        ({"data_end": "451 4.7.1 greylisted"}, FailureClass.TRANSIENT, "smtp_451", 451),
        (
            {"data_end": "554 5.7.1 rejected as spam"},
            FailureClass.PERMANENT,
            "message_refused",
            554,
        ),
    ],
)
def test_a_refusal_is_classified_by_its_code_and_nothing_is_in_the_mailbox(
    server, mail, faults, failure_class, reason_code, status
):
    server.faults(**faults)
    result = mail.deliver(outgoing())
    assert (result.failure_class, result.reason_code, result.status_code) == (
        failure_class,
        reason_code,
        status,
    )
    assert str(status) in result.detail
    assert server.messages() == []


def test_a_refused_connection_is_a_transient_failed_connect(server):
    server.stop()
    result = SmtpDestination.from_config(config(server.port)).deliver(outgoing())
    assert (result.failure_class, result.reason_code) == (FailureClass.TRANSIENT, "connect_failed")


def test_the_connection_closed_after_data_without_an_answer_is_uncertain_with_the_evidence(
    server, mail
):
    server.faults(data_end="drop")
    result = mail.deliver(outgoing())
    assert (result.failure_class, result.reason_code) == (
        FailureClass.UNCERTAIN,
        "answer_lost_after_data",
    )
    local, domain = mail.message_id(KEY).strip("<>").split("@")
    # The evidence a person needs at the mailbox: the Message-ID, the key's header, the server's last reply.
    assert f"Message-ID {local} at {domain}" in result.detail
    assert f"X-Handoff-Action-Key: {KEY}" in result.detail
    assert "last reply: 354" in result.detail
    assert server.message_ids() == [mail.message_id(KEY)]


def test_no_answer_after_data_within_the_timeout_is_uncertain(server):
    server.faults(data_end="hold", hold_seconds=60)
    impatient = SmtpDestination.from_config(config(server.port, timeout=1))
    result = impatient.deliver(outgoing())
    assert (result.failure_class, result.reason_code) == (
        FailureClass.UNCERTAIN,
        "answer_lost_after_data",
    )
    assert "timed out" in result.detail
    assert impatient.call_seconds == 1.0
    assert result.latency_ms < 5000, "the whole session ends within its timeout"
    assert server.message_ids() == [impatient.message_id(KEY)]


def test_smtp_cannot_be_asked_about_a_message(mail):
    with pytest.raises(LookupFailed, match="check the mailbox"):
        mail.lookup(KEY)
    with pytest.raises(LookupFailed):
        mail.list_keys()


# --- TLS and AUTH --------------------------------------------------------------------------------------


@pytest.fixture
def auth_server(tmp_path, certificate):
    cert, key = certificate
    server = SmtpServer(
        tmp_path / "smtp-auth", user="mailer", password="right-password", tls=(cert, key, False)
    )
    yield server
    server.stop()


def auth_config(server, certificate, **overrides) -> dict:
    return config(
        server.port,
        security="starttls",
        ca_file=str(certificate[0]),
        username="mailer",
        password_env=PASSWORD_ENV,
        **overrides,
    )


def test_starttls_and_auth_deliver(auth_server, certificate, monkeypatch):
    monkeypatch.setenv(PASSWORD_ENV, "right-password")
    mail = SmtpDestination.from_config(auth_config(auth_server, certificate))
    assert mail.deliver(outgoing()).delivered
    assert auth_server.message_ids() == [mail.message_id(KEY)]


def test_a_refused_password_is_a_credential_failure_and_nothing_is_sent(
    auth_server, certificate, monkeypatch
):
    monkeypatch.setenv(PASSWORD_ENV, "wrong-password")
    result = SmtpDestination.from_config(auth_config(auth_server, certificate)).deliver(outgoing())
    assert (result.failure_class, result.reason_code, result.status_code) == (
        FailureClass.CREDENTIAL,
        "credential_rejected",
        535,
    )
    assert "wrong-password" not in result.detail
    assert auth_server.messages() == []


def test_a_rotated_password_is_read_at_the_next_call_without_rebuilding(
    auth_server, certificate, tmp_path, settings
):
    settings.HANDOFF_SECRETS_DIR = tmp_path
    secret = tmp_path / "smtp-password"
    secret.write_text("old-password\n")
    overrides = {"password_file": str(secret)}
    cfg = {k: v for k, v in auth_config(auth_server, certificate).items() if k != "password_env"}
    mail = SmtpDestination.from_config({**cfg, **overrides})
    assert mail.deliver(outgoing()).reason_code == "credential_rejected"
    secret.write_text("right-password\n")
    assert mail.deliver(outgoing()).delivered


def test_a_password_variable_gone_after_start_is_a_credential_failure_naming_it(
    auth_server, certificate, monkeypatch
):
    monkeypatch.setenv(PASSWORD_ENV, "right-password")
    mail = SmtpDestination.from_config(auth_config(auth_server, certificate))
    monkeypatch.delenv(PASSWORD_ENV)
    result = mail.deliver(outgoing())
    assert (result.failure_class, result.reason_code) == (
        FailureClass.CREDENTIAL,
        "credential_missing",
    )
    assert PASSWORD_ENV in result.detail


def test_an_untrusted_certificate_is_a_failed_connect_and_nothing_is_sent(auth_server, monkeypatch):
    monkeypatch.setenv(PASSWORD_ENV, "right-password")
    cfg = config(
        auth_server.port, security="starttls", username="mailer", password_env=PASSWORD_ENV
    )
    result = SmtpDestination.from_config(cfg).deliver(outgoing())
    assert (result.failure_class, result.reason_code) == (FailureClass.TRANSIENT, "connect_failed")
    assert "CERTIFICATE_VERIFY_FAILED" in result.detail
    assert auth_server.messages() == []


def test_implicit_tls_delivers(tmp_path, certificate):
    cert, key = certificate
    server = SmtpServer(tmp_path / "smtps", tls=(cert, key, True))
    try:
        mail = SmtpDestination.from_config(config(server.port, security="tls", ca_file=str(cert)))
        assert mail.deliver(outgoing()).delivered
        assert server.message_ids() == [mail.message_id(KEY)]
    finally:
        server.stop()
