"""A Salesforce-style CRM (`tests/providers/salesforce.py`, a process of its own): a create is an upsert by
an external id in the path, looked up by that id, undone by DELETE of the record; reached by
`files/salesforce.destinations.json` and `files/salesforce.workflows.json` alone."""

import pytest

from outbox.destinations.registry import destination_named
from outbox.failures import Outgoing
from outbox.models import Handoff, HandoffKind, HandoffState
from outbox.payloads import payload_hash
from outbox.services import instance_compensate
from tests.factories import onboarding_world
from tests.providers.harness import ProviderProcess
from tests.providers.scenario import Flow, acceptance_000, apply_files, drive, stored

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
TOKEN = "00DT0000000handoff!session"
S = HandoffState


@pytest.fixture
def salesforce(monkeypatch, tmp_path):
    monkeypatch.setenv("HANDOFF_DEST_SALESFORCE_TOKEN", TOKEN)
    provider = ProviderProcess("salesforce", token=TOKEN)
    try:
        apply_files("salesforce", provider.url, tmp_path)
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def flow():
    return Flow(world=onboarding_world(), workflow="crm_account")


def account(name: str) -> dict:
    return {"Name": name, "Industry": "Retail"}


def test_seed_000_at_an_upsert_by_external_id_one_record_per_key(salesforce, flow):
    lost, revised, _ = acceptance_000(
        salesforce, flow, account("Northwind"), account("Northwind Traders"), account("Contoso")
    )
    assert lost.receipt["found_by"] == "lookup", "settled by asking for the external id"
    upserts = [r["path"] for r in salesforce.requests("PATCH")]
    assert len(upserts) == 3 and all(p.rsplit("/", 1)[1] for p in upserts)
    names = {r["External_Id__c"]: r["Name"] for r in salesforce.records()}
    assert names[lost.action_key] == "Northwind", "the first revision's record is not overwritten"
    assert names[revised.action_key] == "Northwind Traders"


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
    destination = destination_named("salesforce-accounts")
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
