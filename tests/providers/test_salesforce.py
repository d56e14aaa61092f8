"""A Salesforce-style CRM (`tests/providers/salesforce.py`, a process of its own): a create is an upsert by
an external id in the path, looked up by that id, undone by DELETE of the record, its client an OAuth2
client credentials flow whose token names no lifetime (renewed when the API answers 401), its work read
from the record's `Status__c`; the approved payload mapped onto Salesforce's own fields (`Name`,
`Industry`, `Plan__c`). Reached by `files/salesforce.destinations.json` and `files/salesforce.workflows.json`
alone."""

import pytest

from outbox.destinations.registry import destination_named
from outbox.failures import Outgoing
from outbox.models import Attempt, Handoff, HandoffKind, HandoffState
from outbox.payloads import payload_hash
from outbox.services import instance_compensate
from tests.factories import onboarding_world
from tests.providers.harness import ProviderProcess
from tests.providers.salesforce import TOKEN_PATH
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
CLIENT_SECRET = "salesforce-consumer-secret"
S = HandoffState
DESTINATION = "salesforce-accounts"


@pytest.fixture
def salesforce(monkeypatch, tmp_path):
    monkeypatch.setenv("HANDOFF_DEST_SALESFORCE_CLIENT_SECRET", CLIENT_SECRET)
    provider = ProviderProcess("salesforce", token=CLIENT_SECRET)
    try:
        apply_files("salesforce", provider.url, tmp_path)
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def flow():
    return Flow(world=onboarding_world(), workflow="crm_account")


def account(name: str, **more) -> dict:
    return {"client_name": name, "plan": "standard", **more}


def tokens_asked(salesforce) -> int:
    return len([r for r in salesforce.requests("POST") if r["path"] == TOKEN_PATH])


def test_seed_000_at_an_upsert_by_external_id_one_record_per_key(salesforce, flow):
    lost, revised, _ = acceptance_000(
        salesforce,
        flow,
        account("Northwind", industry="Retail"),
        account("Northwind Traders", industry="Retail"),
        account("Contoso"),
    )
    assert lost.receipt["found_by"] == "lookup", "settled by asking for the external id"
    upserts = [r for r in salesforce.requests("PATCH")]
    assert len(upserts) == 3 and all(r["path"].rsplit("/", 1)[1] for r in upserts)
    # Mapped onto Salesforce's own fields, the optional industry by its default.
    assert [r["body"] for r in upserts] == [
        {"Name": "Northwind", "Industry": "Retail", "Plan__c": "standard"},
        {"Name": "Northwind Traders", "Industry": "Retail", "Plan__c": "standard"},
        {"Name": "Contoso", "Industry": "Other", "Plan__c": "standard"},
    ]
    names = {r["External_Id__c"]: r["Name"] for r in salesforce.records()}
    assert names[lost.action_key] == "Northwind", "the first revision's record is not overwritten"
    assert names[revised.action_key] == "Northwind Traders"


def test_a_session_that_expires_mid_run_is_renewed_and_nothing_goes_to_a_person(salesforce, flow):
    """The token endpoint names no lifetime: a session is kept until the API answers 401 (here after two
    calls), then renewed and the same upsert sent once more, same external id."""
    salesforce.faults(session_calls=2)
    handoffs = [flow.approve(number, account(f"Client {number}")) for number in (1, 2, 3, 4, 5)]
    done = drive(*handoffs)

    assert {h.state for h in done} == {S.DELIVERED}
    assert not any(went_to_a_person(h) for h in done), "nothing to a person"
    assert set(Attempt.objects.values_list("outcome", flat=True)) == {"created"}
    assert tokens_asked(salesforce) == 3, "a new session each time the last one expired"
    assert len(salesforce.requests("PATCH")) == 5 + 2, "each refused upsert sent once more"
    assert salesforce.effects() == {h.action_key: 1 for h in handoffs}


def test_a_revoked_connected_app_pauses_this_destination_alone(
    salesforce, flow, monkeypatch, tmp_path
):
    [first] = drive(flow.approve(1, account("Northwind")))
    salesforce.faults(revoked=True)  # its session answers 401, and no new one is issued
    refused = flow.approve(2, account("Contoso"))
    sweep_until(lambda: paused_by_its_credential(DESTINATION), what="salesforce paused")

    waiting = stored(refused)
    assert waiting.state == S.PENDING and not went_to_a_person(waiting)
    assert (waiting.failure_class, waiting.reason_code) == ("credential", "token_refused")
    assert "invalid_client" in waiting.last_error and CLIENT_SECRET not in waiting.last_error
    with neighbour("postmark", flow.world, monkeypatch, tmp_path) as deliver_one:
        deliver_one()  # another destination keeps delivering meanwhile
    assert not paused_by_its_credential("postmark-mail")

    salesforce.faults(revoked=False)  # access restored: the breaker's probe resumes it
    [done] = drive(refused)
    assert done.state == S.DELIVERED
    assert salesforce.effects() == {first.action_key: 1, refused.action_key: 1}


def test_the_records_status_read_active_makes_the_requester_read_done(salesforce, flow):
    [step] = drive(flow.approve(1, account("Northwind")))
    pull_work_status_now()
    assert stored(step).work_status == "open"  # Status__c "New"
    assert not requester_reads(flow.world, 1).startswith("done")

    salesforce.faults(status={step.action_key: "Active"})
    pull_work_status_now()
    assert stored(step).work_status == "done"
    assert requester_reads(flow.world, 1).endswith("done: the work of every step is done")
    reads = [r["path"] for r in salesforce.requests("GET")]
    assert reads == [f"/services/data/v60.0/sobjects/Account/{step.destination_id}"] * 2
    assert salesforce.effects() == {step.action_key: 1}


def test_an_undo_deletes_the_record_once_even_when_its_answer_is_lost(salesforce, flow):
    [step] = drive(flow.approve(1, account("Northwind")))
    assert salesforce.effects() == {step.action_key: 1}

    instance_compensate(
        instance_key=step.instance_key, actor=flow.world["olga"], reason="client withdrew"
    )
    salesforce.drop_next()  # the DELETE removes the record; its answer is lost
    [undo] = Handoff.objects.filter(kind=HandoffKind.COMPENSATION)
    [undone] = drive(undo)
    assert undone.state == S.DELIVERED
    assert undone.destination_id == step.destination_id
    assert salesforce.effects() == {}, "the record is gone: zero effects for the key"
    deletes = [r["path"] for r in salesforce.requests("DELETE")]
    assert deletes == [f"/services/data/v60.0/sobjects/Account/{step.destination_id}"] * 2
    assert len(salesforce.requests("PATCH")) == 1, "an undo is never a second create"
    assert stored(step).state == S.DELIVERED


def test_an_upsert_answered_204_without_a_body_is_done_and_its_id_is_looked_up(salesforce):
    """API versions before 46.0 answer an update 204 No Content: done, and the record's id is asked for."""
    destination = destination_named(DESTINATION)
    fields = {"Name": "Northwind", "Industry": "Retail"}
    sent = Outgoing(
        action_key="crm_account:7:9:1", payload=fields, payload_hash=payload_hash(fields)
    )
    created = destination.deliver(sent)
    salesforce.faults(no_content=True)
    repeated = destination.deliver(sent)
    assert (created.delivered, created.created, created.status_code) == (True, True, 201)
    assert (repeated.delivered, repeated.created, repeated.status_code) == (True, False, 204)
    assert repeated.task_id == created.task_id and repeated.receipt["found_by"] == "lookup"
    assert salesforce.effects() == {sent.action_key: 1}
