"""An archived handoff keeps the request it sent (issue 35): retention copies `Handoff.request` into the
archive row (both backends: the portable move and PostgreSQL's INSERT … SELECT), the archived page shows it
redacted under "What it sent", and the export carries it redacted."""

import csv
import html
import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db.models import F

from outbox.models import ArchivedHandoff, Handoff, HandoffState
from outbox.services.retention import handoffs_archive_settled
from tests.console.clients import client_for
from tests.factories import HandoffFactory, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

HTTP_REQUEST = {
    "body": {"properties": {"company": "Client 1", "email": "ops@client-one.example"}},
    "path": {"object": "Contact"},
    "query": {"source": "handoff"},
    "headers": {"X-Plan": "standard"},
}
EMAIL_REQUEST = {
    "subject": "Welcome aboard, Client 2",
    "text": "Hello Client 2,\n\nyour standard plan starts today.\n",
    "to": "ops@client-two.example",
}


@pytest.fixture
def world():
    return onboarding_world()


@pytest.fixture
def archived(world) -> dict[str, ArchivedHandoff]:
    handoffs = {
        "http": HandoffFactory(number=1, state=HandoffState.DELIVERED, request=HTTP_REQUEST),
        "email": HandoffFactory(number=2, state=HandoffState.DELIVERED, request=EMAIL_REQUEST),
        "unmapped": HandoffFactory(number=3, state=HandoffState.DELIVERED),
    }
    Handoff.objects.update(updated_at=F("updated_at") - timedelta(days=40))
    assert handoffs_archive_settled().archived == 3
    return {
        name: ArchivedHandoff.objects.get(action_key=handoff.action_key)
        for name, handoff in handoffs.items()
    }


def test_the_archive_row_keeps_the_request_the_handoff_sent(archived):
    assert archived["http"].request == HTTP_REQUEST
    assert archived["email"].request == EMAIL_REQUEST
    assert archived["unmapped"].request is None


def what_it_sent(world, row: ArchivedHandoff) -> str:
    page = html.unescape(
        client_for(world["olga"]).get(f"/handoffs/archived/{row.pk}/").content.decode()
    )
    start = page.index('<section id="what-it-sent">')
    return page[start : page.index("</section>", start)]


def test_the_archived_page_shows_what_it_sent_redacted(world, archived):
    http = what_it_sent(world, archived["http"])
    assert '"company": "Client 1"' in http and '"email": "[redacted]"' in http
    assert '"object": "Contact"' in http and '"X-Plan": "standard"' in http
    assert "ops@client-one.example" not in http

    email = what_it_sent(world, archived["email"])
    assert "<dt>Subject</dt><dd>Welcome aboard, Client 2</dd>" in email
    assert "<dt>To</dt><dd><code>[redacted]</code></dd>" in email
    assert "ops@client-two.example" not in email

    assert "mapped no request" in what_it_sent(world, archived["unmapped"])


def export(fmt: str) -> str:
    out = io.StringIO()
    call_command("export_archive", "--workspace", "7", "--format", fmt, stdout=out)
    return out.getvalue()


def test_the_export_carries_the_request_redacted(archived):
    lines = {row["action_key"]: row for row in map(json.loads, export("jsonl").splitlines())}
    assert lines[archived["http"].action_key]["request"]["body"]["properties"] == {
        "company": "Client 1",
        "email": "[redacted]",
    }
    assert lines[archived["email"].action_key]["request"]["to"] == "[redacted]"
    assert lines[archived["unmapped"].action_key]["request"] is None

    rows = {row["action_key"]: row for row in csv.DictReader(io.StringIO(export("csv")))}
    assert json.loads(rows[archived["email"].action_key]["request"])["subject"] == (
        "Welcome aboard, Client 2"
    )
    assert rows[archived["unmapped"].action_key]["request"] == ""
    assert "ops@client-" not in export("csv")
