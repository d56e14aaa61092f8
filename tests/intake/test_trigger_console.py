"""The triggers screen: every outcome with its reasons, searchable by sender reference, scoped to my workspaces."""

from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

import pytest

from approvals.models import TriggerOutcome, TriggerRecord
from tests.factories import make_user
from tests.intake.triggers import trigger_document

pytestmark = pytest.mark.django_db


def earlier() -> datetime:
    """Half a minute before now, when the message is signed (not when the module was imported)."""
    return datetime.now(tz=UTC) - timedelta(seconds=30)


@pytest.fixture
def received(world, send):
    """One trigger of each outcome in workspace 7, and one accepted in workspace 8."""
    send(trigger_document(reference="crm-1001", revision=2), msg_id="evt_a", timestamp=earlier())
    send(trigger_document(reference="crm-1001", revision=2), msg_id="evt_a")
    send(trigger_document(reference="crm-1001", revision=1))
    send(trigger_document(reference="erp-77", payload={"plan": "gold"}))
    send(trigger_document(reference="secret-8", workspace_id=8))
    assert set(TriggerRecord.objects.values_list("outcome", flat=True)) == set(
        TriggerOutcome.values
    )
    return world


def test_triggers_screen_lists_every_outcome_with_reasons(
    received, client, django_assert_max_num_queries
):
    client.force_login(received["alice"])
    with django_assert_max_num_queries(12):
        page = client.get("/approvals/api/triggers/")
    assert page.status_code == 200
    html = page.content.decode()
    for label in ("Accepted", "Duplicate", "Stale (ignored)", "Rejected at intake"):
        assert label in html
    assert "is older than revision 2, the newest recorded; ignored" in html
    assert "payload.plan: &#x27;gold&#x27; is not one of" in html
    assert "payload: &#x27;contact_email&#x27; is a required property" in html
    assert "mode: live" in html


def test_triggers_screen_searches_by_sender_reference(received, client):
    client.force_login(received["alice"])
    html = client.get("/approvals/api/triggers/", {"q": "erp"}).content.decode()
    assert "<td>erp-77</td>" in html and "<td>crm-1001</td>" not in html
    html = client.get(
        "/approvals/api/triggers/", {"q": "CRM-1001", "outcome": "stale"}
    ).content.decode()
    assert html.count('class="trigger stale"') == 1 and 'class="trigger accepted"' not in html


def test_triggers_screen_htmx_request_gets_only_the_results(received, client):
    client.force_login(received["alice"])
    html = client.get(
        "/approvals/api/triggers/", {"q": "erp"}, headers={"HX-Request": "true"}
    ).content.decode()
    assert "<table" in html and "<html" not in html and "erp-77" in html


def test_triggers_of_other_workspaces_are_invisible(received, client):
    client.force_login(received["alice"])
    assert "<td>secret-8</td>" not in client.get("/approvals/api/triggers/").content.decode()
    hidden = TriggerRecord.objects.get(reference="secret-8")
    assert client.get(f"/approvals/api/triggers/{hidden.pk}/").status_code == 404
    client.force_login(received["mallory"])
    html = client.get("/approvals/api/triggers/").content.decode()
    assert "<td>secret-8</td>" in html and "<td>crm-1001</td>" not in html
    assert client.get(f"/approvals/api/triggers/{hidden.pk}/").status_code == 200


def test_trigger_detail_shows_reasons_and_a_redacted_body(received, client):
    client.force_login(received["olga"])
    record = TriggerRecord.objects.get(reference="erp-77")
    html = client.get(f"/approvals/api/triggers/{record.pk}/").content.decode()
    assert "Rejected at intake" in html and "is not one of" in html
    accepted = TriggerRecord.objects.filter(
        reference="crm-1001", outcome=TriggerOutcome.ACCEPTED
    ).get()
    html = client.get(f"/approvals/api/triggers/{accepted.pk}/").content.decode()
    assert "Northwind Traders" in html
    assert "onboarding@northwind.example" not in html and "[redacted]" in html
    assert "Received again" in html, "the duplicate is listed under its original"


def test_triggers_screen_needs_sign_in_and_shows_nothing_without_membership(received, client):
    assert client.get("/approvals/api/triggers/").status_code == 302
    client.force_login(make_user("stranger"))
    html = client.get("/approvals/api/triggers/").content.decode()
    assert "No triggers" in html


def test_triggers_screen_pages_by_keyset(received, client, monkeypatch):
    monkeypatch.setattr("console.views.triggers.PAGE_SIZE", 2)
    client.force_login(received["alice"])
    first = client.get("/approvals/api/triggers/").content.decode()
    assert "Older triggers" in first
    cursor = unquote(first.split("before=")[1].split('"')[0])
    second = client.get("/approvals/api/triggers/", {"before": cursor}).content.decode()
    rows = first.count('<tr class="trigger') + second.count('<tr class="trigger')
    assert rows == 4, "four triggers in workspace 7, none twice"


def test_trigger_appears_in_the_approvals_queue(received, client):
    client.force_login(received["alice"])
    html = client.get("/approvals/").content.decode()
    assert 'href="/approvals/7/43/1/"' in html


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_a_cursor_that_cannot_be_read_answers_400_in_the_page_with_the_reason_and_no_rows(
    received, client, htmx
):
    """htmx swaps a 400 into #trigger-results (the htmx-config in templates/base.html): what it swaps must be the
    results' HTML with the reason, not a plain-text line; the whole page says the same."""
    client.force_login(received["alice"])
    headers = {"HX-Request": "true"} if htmx else {}
    answer = client.get("/approvals/api/triggers/", {"before": "not-a-cursor"}, headers=headers)
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("text/html")
    html = answer.content.decode()
    assert 'id="trigger-search-error" role="alert">Not listed: before' in html
    assert '<tr class="trigger' not in html
    assert ('id="trigger-results"' in html) is not htmx, "the page, or only its results for htmx"
