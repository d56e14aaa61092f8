"""The console's "Run the whole contract" (issue 35, "prove after"): for people with the destination
permission, at a destination whose contract a probe can run, the same probe as `manage.py destinations probe`
against a provider-style test server (a process of its own), each part's verdict shown and kept as the
destination's event."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from outbox.models import DestinationEvent, DestinationHealth, Handoff
from tests.console.clients import client_for
from tests.factories import grant_destination_admin
from tests.factories import retry_after_hold as hold_for_retry_after
from tests.providers.harness import ProviderProcess
from tests.providers.scenario import FILES

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
CLIENT_SECRET = "salesforce-consumer-secret"
NAME = "salesforce-accounts"
PAGE = f"/destinations/{NAME}/"


@pytest.fixture
def salesforce(monkeypatch, tmp_path):
    monkeypatch.setenv("HANDOFF_DEST_SALESFORCE_CLIENT_SECRET", CLIENT_SECRET)
    provider = ProviderProcess("salesforce", token=CLIENT_SECRET)
    document = json.loads((FILES / "salesforce.destinations.json").read_text())
    document["destinations"][0]["url"] = provider.url
    document["destinations"][0]["auth"]["token_url"] = f"{provider.url}/services/oauth2/token"
    path = tmp_path / "destinations.json"
    path.write_text(json.dumps(document))
    call_command("destinations", "apply", str(path), stdout=StringIO())
    yield provider
    provider.stop()


def test_an_admin_runs_the_whole_contract_and_sees_each_parts_verdict(world, salesforce):
    olga = client_for(grant_destination_admin(world["olga"]))
    assert b"Run the whole contract" in olga.get(PAGE).content
    answer = olga.post(f"{PAGE}test", {"contract": "whole"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    shown = answer.content.decode()
    assert "The whole contract passed its probe (probe:" in shown
    for part in ("create", "receipt", "repeat", "lookup", "undo"):
        assert f"<code>{part}: ok: " in shown
    assert salesforce.effects() == {}, "created, repeated, looked up, undone: zero effects"
    assert len(salesforce.requests("PATCH")) == 2 and len(salesforce.requests("DELETE")) == 1
    [event] = DestinationEvent.objects.filter(destination=NAME, action="probe")
    assert event.actor == world["olga"] and "undo: ok" in event.reason
    assert not Handoff.objects.exists()


def test_without_the_destination_permission_there_is_no_button_and_nothing_is_sent(
    world, salesforce
):
    olga = client_for(world["olga"])
    assert b"Run the whole contract" not in olga.get(PAGE).content
    refused = olga.post(f"{PAGE}test", {"contract": "whole"})
    assert refused.status_code == 403
    assert salesforce.requests() == []
    assert not DestinationEvent.objects.filter(action="probe").exists()
    assert not DestinationHealth.objects.filter(connection_tested_at__isnull=False).exists()


def test_a_second_run_within_the_turn_is_429_and_sends_nothing_more(world, salesforce):
    olga = client_for(grant_destination_admin(world["olga"]))
    first = olga.post(f"{PAGE}test", {"contract": "whole"}, follow=True)
    assert b"The whole contract passed its probe" in first.content
    assert b"probe: probe probe:" in first.content, "the verdicts are the destination's event"
    sent = len(salesforce.requests())
    again = olga.post(f"{PAGE}test", {"contract": "whole"})
    assert again.status_code == 429
    assert len(salesforce.requests()) == sent


def retry_after_hold(name: str) -> None:
    """The hold a 429 with Retry-After writes (`outbox/services/limits.py`), live for five minutes."""
    hold_for_retry_after(name, 300, "HTTP 429 with Retry-After 300 s")


@pytest.mark.parametrize("contract", ["whole", ""], ids=["whole contract", "connection test"])
def test_a_destination_that_asked_to_be_left_alone_is_not_probed_from_its_page(
    world, salesforce, contract
):
    """Its Retry-After hold refuses the console's tests as `manage.py destinations probe` refuses: nothing is
    sent, the page names the hold, and the test's turn is not taken."""
    olga = client_for(grant_destination_admin(world["olga"]))
    retry_after_hold(NAME)
    answer = olga.post(f"{PAGE}test", {"contract": contract}, HTTP_HX_REQUEST="true")

    assert answer.status_code == 200
    shown = answer.content.decode()
    assert "Held: not asked (Retry-After hold: HTTP 429 with Retry-After 300 s" in shown
    assert salesforce.requests() == []
    assert not DestinationEvent.objects.filter(action="probe").exists()
