"""The demo's mailbox: `manage.py demo_mailbox` is a real SMTP server in a process of its own, and the
mailbox page shows what it accepted."""

import os
import re
import smtplib
import subprocess
from email.message import EmailMessage

import pytest
from django.test import override_settings

from tests.factories import make_user
from tests.processes import ROOT, manage_argv

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def mailbox(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "DEMO_MAILBOX_DIR": str(tmp_path),
        # The kernel chooses the port: the mailbox prints the one it listens on.
        "DEMO_SMTP_PORT": "0",
    }
    server = subprocess.Popen(
        manage_argv("demo_mailbox"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Ready when it says so (it prints its address once it listens).
        line = server.stdout.readline()
        assert "smtp://127.0.0.1:" in line, line
        yield tmp_path, int(line.rsplit(":", 1)[1])
    finally:
        server.terminate()
        # A loaded machine may take more than seconds to run the process's shutdown; then it is killed.
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def send(port: int, *, subject: str, message_id: str) -> None:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = (
        "demo@localhost",
        "ops@example.com",
        subject,
    )
    message["Message-ID"] = message_id
    message.set_content("Welcome aboard.")
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
        smtp.send_message(message)


def test_the_page_shows_each_message_the_mailbox_accepted(client, mailbox):
    directory, port = mailbox
    send(port, subject="Welcome, Northwind", message_id="<k1@handoff.local>")
    # The mailbox stores the message before it answers 250, so it is there when `send` returns.
    client.force_login(make_user("olga"))
    with override_settings(DEMO_MAILBOX_DIR=str(directory)):
        page = client.get("/delivery/mailbox/")
    assert page.status_code == 200
    assert b"Welcome, Northwind" in page.content
    assert b"&lt;k1@handoff.local&gt;" in page.content


def test_the_messages_are_the_pages_own_list_not_status_messages_and_addresses_show_their_domain(
    client, mailbox
):
    # Issue 37 item 8: the view passed its list as `messages`, which base.html renders as status messages:
    # raw `Stored(name=…, body=…)` boxes above the heading, recipients' addresses included.
    directory, port = mailbox
    for n in range(3):
        send(port, subject=f"Welcome, team {n}", message_id=f"<k{n}@handoff.local>")
    client.force_login(make_user("olga"))
    with override_settings(DEMO_MAILBOX_DIR=str(directory)):
        page = client.get("/delivery/mailbox/")
    html = page.content.decode()
    assert "Stored(" not in html
    assert 'role="status"' not in html
    assert "ops@example.com" not in html and "demo@localhost" not in html
    # Once a message in the words; its claim (`data-value`, docs/console.md) repeats the same domain.
    assert re.sub(r"<[^>]+>", "", html).count("…@example.com") == 3
    heading = html.index("<h1>Demo mailbox</h1>")
    listed = html.index('<ol class="mailbox">')
    assert heading < listed
    assert html.count('<article class="mail">') == 3
    for n in range(3):
        assert html.index(f"Welcome, team {n}") > listed


def test_without_a_mailbox_the_page_is_404_and_anonymous_people_sign_in_first(client):
    assert client.get("/delivery/mailbox/").status_code == 302
    client.force_login(make_user("olga"))
    with override_settings(DEMO_MAILBOX_DIR=""):
        assert client.get("/delivery/mailbox/").status_code == 404
