"""A HubSpot-style CRM (`tests/providers/hubspot.py`, a process of its own): the approved payload mapped
into HubSpot's `{"properties": …}` envelope, whose unique property holds the key, a duplicate answered 409
with the existing id (read as "already there"), a search that answers a list, 429 with Retry-After, a
private app token as the bearer, an undo that archives the contact (`DELETE …/contacts/{id}`), and the
work read from its `lifecyclestage`; reached by `files/hubspot.destinations.json` and
`files/hubspot.workflows.json` alone."""

import pytest

from outbox.models import Attempt, Handoff, HandoffKind, HandoffState
from outbox.services import instance_compensate
from tests.factories import onboarding_world
from tests.providers.harness import ProviderProcess
from tests.providers.scenario import (
    Flow,
    acceptance_000,
    apply_files,
    drive,
    neighbour,
    paused_by_its_credential,
    pull_work_status_now,
    requester_reads,
    stored,
    sweep_until,
    went_to_a_person,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
TOKEN = "pat-na1-handoff"
TOKEN_ENV = "HANDOFF_DEST_HUBSPOT_TOKEN"
S = HandoffState
CONTACTS = "/crm/v3/objects/contacts"


@pytest.fixture
def hubspot(monkeypatch, tmp_path):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    provider = ProviderProcess("hubspot", token=TOKEN)
    try:
        apply_files("hubspot", provider.url, tmp_path)
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def flow():
    return Flow(world=onboarding_world(), workflow="crm_contact")


def contact(email: str, first_name: str = "Ada", **more) -> dict:
    return {"contact_email": email, "first_name": first_name, **more}


def creates(hubspot) -> list[dict]:
    return [r for r in hubspot.requests("POST") if r["path"] == CONTACTS]


def test_seed_000_at_a_unique_property_crm_one_contact_per_key(hubspot, flow):
    lost, _, _ = acceptance_000(
        hubspot,
        flow,
        contact("ada@northwind.example", last_name="Lovelace"),
        contact("ada@northwind.example", first_name="Augusta", last_name="Lovelace"),
        contact("grace@contoso.example", first_name="Grace"),
    )
    assert lost.receipt["found_by"] == "lookup", "found by the search for its key"
    sent = creates(hubspot)
    assert len(sent) == 3, "never sent twice: the lost answer was found by its search"
    # Mapped into HubSpot's envelope and property names; the key and the hash written beside them.
    assert sent[0]["body"] == {
        "properties": {
            "email": "ada@northwind.example",
            "firstname": "Ada",
            "lastname": "Lovelace",
            "handoff_key": lost.action_key,
            "handoff_payload_hash": lost.payload_hash,
        }
    }
    assert sent[2]["body"]["properties"]["lastname"] == "", "the optional last name by its default"


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


def test_a_wrong_private_app_token_pauses_this_destination_alone(
    hubspot, flow, monkeypatch, tmp_path
):
    monkeypatch.setenv(TOKEN_ENV, "pat-na1-revoked")
    refused = flow.approve(1, contact("ada@northwind.example"))
    sweep_until(lambda: paused_by_its_credential("hubspot-contacts"), what="hubspot paused")

    waiting = stored(refused)
    assert waiting.state == S.PENDING and not went_to_a_person(waiting)
    assert (waiting.failure_class, waiting.reason_code) == ("credential", "credential_rejected")
    assert "INVALID_AUTHENTICATION" in waiting.last_error and hubspot.effects() == {}
    with neighbour("postmark", flow.world, monkeypatch, tmp_path) as deliver_one:
        deliver_one()  # another destination keeps delivering meanwhile
    assert not paused_by_its_credential("postmark-mail")

    monkeypatch.setenv(TOKEN_ENV, TOKEN)  # a new token: the breaker's probe resumes it
    [done] = drive(refused)
    assert done.state == S.DELIVERED
    assert hubspot.effects() == {refused.action_key: 1}


def test_the_lifecycle_stage_read_customer_makes_the_requester_read_done(hubspot, flow):
    [step] = drive(flow.approve(1, contact("ada@northwind.example")))
    pull_work_status_now()
    assert stored(step).work_status == "open"  # lifecyclestage "lead"
    assert not requester_reads(flow.world, 1).startswith("done")

    hubspot.faults(lifecyclestage={step.action_key: "customer"})
    pull_work_status_now()
    assert stored(step).work_status == "done"
    assert requester_reads(flow.world, 1).endswith("done: the work of every step is done")
    reads = [(r["path"], r["query"]) for r in hubspot.requests("GET")]
    assert reads == [(f"{CONTACTS}/{step.destination_id}", {"properties": "lifecyclestage"})] * 2
    assert hubspot.effects() == {step.action_key: 1}


def test_an_undo_archives_the_contact_once_even_when_its_answer_is_lost(hubspot, flow):
    [step] = drive(flow.approve(1, contact("ada@northwind.example")))
    instance_compensate(
        instance_key=step.instance_key, actor=flow.world["olga"], reason="client withdrew"
    )
    hubspot.drop_next()  # the DELETE archives the contact; its answer is lost
    [undo] = Handoff.objects.filter(kind=HandoffKind.COMPENSATION)
    [undone] = drive(undo)

    assert undone.state == S.DELIVERED and not went_to_a_person(undone)
    assert hubspot.effects() == {}, "the contact is archived: zero effects for the key"
    deletes = {r["path"] for r in hubspot.requests("DELETE")}
    assert deletes == {f"{CONTACTS}/{step.destination_id}"}
    assert len(creates(hubspot)) == 1, "an undo is never a second create"
