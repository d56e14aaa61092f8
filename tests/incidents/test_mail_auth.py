"""The product's own e-mail (e-mail alert channels, approval notices) through a mail server that requires SMTP
AUTH: EMAIL_HOST_USER and EMAIL_HOST_PASSWORD, from the environment only, become the smtp kind's credentials
(the destination row names the variables, never holds the password). A real aiosmtpd server in a process of
its own, STARTTLS with its own certificate (EMAIL_CA_FILE), refusing MAIL before AUTH."""

import json

import pytest

from approvals.services.approval_notices import approval_mail_destination_sync
from incidents.models import Notification
from outbox.destinations.registry import DestinationInvalid, destination_from_config
from outbox.models import DestinationConfig, Handoff, HandoffState
from outbox.services.destination_configs import mail_auth_check, product_mail_config
from tests.builders import approve
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import REJECTED
from tests.outbox.destinations.smtp_server import SmtpServer, make_certificate

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
PASSWORD = "right-password"


@pytest.fixture
def auth_mail(tmp_path, settings, monkeypatch):
    cert, key = make_certificate(tmp_path)
    server = SmtpServer(tmp_path / "smtp", user="mailer", password=PASSWORD, tls=(cert, key, False))
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    settings.EMAIL_USE_TLS, settings.EMAIL_USE_SSL = True, False
    settings.EMAIL_CA_FILE = str(cert)
    settings.ALERT_EMAILS = ["oncall@example.com"]
    settings.ALERT_WEBHOOK_URL = settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.CONSOLE_BASE_URL = "https://console.example"
    monkeypatch.setenv("EMAIL_HOST_USER", "mailer")
    monkeypatch.setenv("EMAIL_HOST_PASSWORD", PASSWORD)
    yield server
    server.stop()


def test_an_email_channel_logs_in_to_a_mail_server_that_requires_auth(world, auth_mail):
    """Fails on the old code: the smtp destination of the e-mail channel sent no AUTH, the server answered
    530 and no message arrived."""
    from outbox.destinations import InProcessDestination
    from outbox.dispatch.dispatcher import handoff_deliver

    handoff = approve(world, number=9)
    Handoff.objects.filter(pk=handoff.pk).update(payload=REJECTED)
    handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    alerts_send_due()

    sent = Handoff.objects.filter(pk__in=Notification.objects.values("handoff_id"))
    mail_rows = DestinationConfig.objects.filter(kind="smtp", name__in=sent.values("destination"))
    assert mail_rows.exists()
    by_mail = sent.filter(destination__in=mail_rows.values("name"))
    assert set(by_mail.values_list("state", flat=True)) == {HandoffState.DELIVERED}
    # Exactly one message per notification, each under its own Message-ID, accepted after AUTH.
    messages = auth_mail.wait_for_messages(by_mail.count())
    ids = [m["Message-ID"] for m in messages]
    assert len(ids) == len(set(ids)) == by_mail.count() >= 1
    assert {m["X-Envelope-To"] for m in messages} >= {"oncall@example.com"}
    for row in mail_rows:
        assert row.config["mail_settings_auth"] is True
        assert PASSWORD not in json.dumps(row.config) and "mailer" not in json.dumps(row.config)


def test_auth_without_its_password_or_in_clear_is_refused_by_the_variable_and_writes_nothing(
    world, settings, monkeypatch
):
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    monkeypatch.setenv("EMAIL_HOST_USER", "mailer")
    monkeypatch.delenv("EMAIL_HOST_PASSWORD", raising=False)
    [error] = mail_auth_check()
    assert error.msg.startswith("EMAIL_HOST_PASSWORD: not set in the environment")
    with pytest.raises(DestinationInvalid, match="EMAIL_HOST_PASSWORD"):
        approval_mail_destination_sync()
    monkeypatch.setenv("EMAIL_HOST_PASSWORD", PASSWORD)
    [error] = mail_auth_check()
    assert error.msg.startswith("EMAIL_HOST_USER: SMTP AUTH needs EMAIL_USE_TLS or EMAIL_USE_SSL")
    with pytest.raises(DestinationInvalid, match="EMAIL_HOST_USER"):
        approval_mail_destination_sync()
    assert not DestinationConfig.objects.filter(kind="smtp").exists()
    settings.EMAIL_USE_TLS = True
    assert mail_auth_check() == []


def test_no_row_sends_the_mail_password_to_another_server(settings, monkeypatch):
    """A destinations file cannot point `mail_settings_auth` at a server of its own choosing."""
    monkeypatch.setenv("EMAIL_HOST_USER", "mailer")
    monkeypatch.setenv("EMAIL_HOST_PASSWORD", PASSWORD)
    settings.EMAIL_USE_TLS = True
    config = {**product_mail_config(), "kind": "smtp", "name": "elsewhere", "host": "mx.example"}
    with pytest.raises(DestinationInvalid, match="mail_settings_auth logs in only to EMAIL_HOST"):
        destination_from_config(config)
