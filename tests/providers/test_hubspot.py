"""A HubSpot-style CRM (`tests/providers/hubspot.py`, a process of its own): a `{"properties": …}` body
whose unique property holds the key, a duplicate answered 409 with the existing id (read as "already
there"), a search that answers a list, and 429 with Retry-After; reached by
`files/hubspot.destinations.json` and `files/hubspot.workflows.json` alone."""

import pytest

from outbox.models import Attempt
from tests.factories import onboarding_world
from tests.providers.harness import ProviderProcess
from tests.providers.scenario import Flow, acceptance_000, apply_files, drive, went_to_a_person

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
TOKEN = "pat-na1-handoff"


@pytest.fixture
def hubspot(monkeypatch, tmp_path):
    monkeypatch.setenv("HANDOFF_DEST_HUBSPOT_TOKEN", TOKEN)
    provider = ProviderProcess("hubspot", token=TOKEN)
    try:
        apply_files("hubspot", provider.url, tmp_path)
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def flow():
    return Flow(world=onboarding_world(), workflow="crm_contact")


def contact(email: str, firstname: str = "Ada") -> dict:
    return {"properties": {"email": email, "firstname": firstname, "lastname": "Lovelace"}}


def test_seed_000_at_a_unique_property_crm_one_contact_per_key(hubspot, flow):
    lost, _, _ = acceptance_000(
        hubspot,
        flow,
        contact("ada@northwind.example"),
        contact("ada@northwind.example", firstname="Augusta"),
        contact("grace@contoso.example", firstname="Grace"),
    )
    assert lost.receipt["found_by"] == "lookup", "found by the search for its key"
    creates = [r for r in hubspot.requests("POST") if r["path"] == "/crm/v3/objects/contacts"]
    assert len(creates) == 3, "never sent twice: the lost answer was found by its search"


def test_a_duplicate_of_the_unique_property_is_already_there_never_a_conflict(hubspot, flow):
    """The answer is lost and the search cannot answer: the create is sent again with the same key, and the
    409 naming the existing contact settles it with that contact's id."""
    handoff = flow.approve(1, contact("ada@northwind.example"))
    hubspot.drop_next()
    hubspot.faults(search_down=1)
    [done] = drive(handoff)
    [existing] = hubspot.records()
    assert done.state == "delivered" and not went_to_a_person(done)
    assert done.destination_id == existing["id"]
    outcomes = Attempt.objects.filter(handoff=done).order_by("number")
    assert list(outcomes.values_list("outcome", "status_code")) == [
        ("uncertain", None),
        ("duplicate", 409),
    ]
    assert hubspot.effects() == {handoff.action_key: 1}


def test_a_rate_limit_is_waited_out_then_one_contact(hubspot, flow):
    handoff = flow.approve(1, contact("ada@northwind.example"))
    hubspot.faults(rate_limited=1)
    [done] = drive(handoff)
    outcomes = Attempt.objects.filter(handoff=done).order_by("number")
    assert list(outcomes.values_list("outcome", "reason_code")) == [
        ("failed", "rate_limited"),
        ("created", ""),
    ]
    assert hubspot.effects() == {handoff.action_key: 1}
