"""The incident of an OAuth2 token endpoint's outage (`destination:<name>:token_endpoint`) says what happened in
words, as Health does ("token endpoint unavailable (the API was not called)"), never the code `token_endpoint`:
in its evidence and failure class on the incident page, in its notification's text and in the admin, with the
next action pointing at the token endpoint, not the API. Against the token server and the API, each a process of
its own (`oauth2_servers`), the pause made by the dispatcher. Both backends."""

import re

import pytest
from django.test import Client

from approvals.services import support_staff_enroll
from incidents.models import Incident, IncidentKind
from incidents.services.incidents import incidents_sync
from incidents.text import incident_summary
from outbox.clock import db_now_plus
from outbox.destinations.registry import destination_from_config
from outbox.dispatch.dispatcher import dispatch_batch
from outbox.models import Handoff
from tests.factories import HandoffFactory, make_user, onboarding_world
from tests.outbox.destinations.test_oauth2_credentials import (  # noqa: F401 (fixtures)
    config,
    oauth2_auth,
    servers,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
WORDS = "token endpoint unavailable (the API was not called)"


@pytest.fixture
def token_endpoint_incident(servers, settings) -> Incident:  # noqa: F811
    """crm's token endpoint answers 503: three handoffs pause crm (its breaker) and the sweep opens the
    incident."""
    settings.HANDOFF_BREAKER_THRESHOLD = 3
    token_server, api = servers
    crm = destination_from_config(config(api, oauth2_auth(token_server)))
    token_server.faults(down=503)
    try:
        for _ in range(3):
            HandoffFactory(destination="crm")
        for _ in range(3):
            dispatch_batch(destination=crm)
            Handoff.objects.filter(destination="crm").update(next_attempt_at=db_now_plus(-1))
    finally:
        crm.close()
    incidents_sync()
    [incident] = Incident.objects.filter(kind=IncidentKind.DESTINATION)
    assert incident.cause == "destination:crm:token_endpoint"
    return incident


def shown(html: str, element_id: str) -> str:
    """The text of the element of that id (a `<dd>`), tags and spacing dropped."""
    found = re.search(rf'id="{element_id}">(.*?)</', html, re.S)
    assert found, element_id
    return " ".join(found.group(1).split())


def test_the_incident_page_says_the_token_endpoint_in_words(token_endpoint_incident):
    client = Client()
    client.force_login(onboarding_world()["olga"])
    html = client.get(f"/incidents/{token_endpoint_incident.pk}/").content.decode()

    for evidence in (shown(html, "evidence-first"), shown(html, "evidence-last")):
        assert evidence.startswith(f"{WORDS} since "), evidence
        assert "token_endpoint since" not in evidence
    summary = html.split('id="incident-summary"', 1)[1].split("</dl>", 1)[0]
    assert f"<dt>Failure class</dt><dd>{WORDS}</dd>" in summary
    assert "token endpoint of destination crm" in shown(html, "next-action")


def test_the_notification_text_says_the_token_endpoint_in_words(token_endpoint_incident):
    lines = incident_summary(token_endpoint_incident).lines()

    assert f"Failure class:        {WORDS}" in lines
    [first] = [line for line in lines if line.startswith("First evidence:")]
    assert first.removeprefix("First evidence:").strip().startswith(f"{WORDS} since ")
    [action] = [line for line in lines if line.startswith("Safest next action:")]
    assert "OAuth2 token endpoint of destination crm" in action


def test_the_admin_says_the_token_endpoint_in_words(token_endpoint_incident):
    support = make_user("sam-support")
    support_staff_enroll(user=support)
    client = Client()
    client.force_login(support)
    html = client.get(
        f"/admin/incidents/incident/{token_endpoint_incident.pk}/change/"
    ).content.decode()

    assert WORDS in html
    assert f"{WORDS} since " in html  # its evidence
    assert "token_endpoint since" not in html
