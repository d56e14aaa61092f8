"""A Stripe-style API (`tests/providers/stripe.py`, a process of its own): the key in the Idempotency-Key
header, reached by `files/stripe.destinations.json` and `files/stripe.workflows.json` alone, the approved
payload mapped onto Stripe's own parameters (`name`, `email`, `description`). It has no lookup: a lost
answer is settled by sending the same request with the same key, which replays. An undo deletes the
customer (`DELETE /v1/customers/{id}`).

Work status "delivered": the customer object is the work. A Stripe customer has no status of its own to pull
(nothing at Stripe goes on to finish it once it exists), so the requester reads done when it is created."""

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
    requester_reads,
    stored,
    sweep_until,
    went_to_a_person,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
TOKEN = "sk_test_handoff"
TOKEN_ENV = "HANDOFF_DEST_STRIPE_SECRET_KEY"
S = HandoffState


@pytest.fixture
def stripe(monkeypatch, tmp_path):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    provider = ProviderProcess("stripe", token=TOKEN)
    try:
        apply_files("stripe", provider.url, tmp_path)
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def flow():
    return Flow(world=onboarding_world(), workflow="billing_customer")


def customer(name: str, **more) -> dict:
    return {"client_name": name, "billing_email": "billing@northwind.example", **more}


def test_seed_000_at_a_key_header_api_one_customer_per_key(stripe, flow):
    lost, _, _ = acceptance_000(
        stripe,
        flow,
        customer("Northwind"),
        customer("Northwind Traders"),
        customer("Contoso", notes="a reseller"),
    )
    # Settled by a repeat with the same key, which the API replayed: one customer, the same id.
    outcomes = Attempt.objects.filter(handoff=lost).order_by("number")
    assert list(outcomes.values_list("outcome", flat=True)) == ["uncertain", "duplicate"]
    sent = [r["body"] for r in stripe.requests("POST")]
    assert len(sent) == 4, "three creates and one repeat"
    # Mapped onto Stripe's own parameters, the optional description by its default.
    assert sent[0] == {
        "name": "Northwind",
        "email": "billing@northwind.example",
        "description": "onboarded through Handoff",
    }
    assert sent[-1]["description"] == "a reseller"


def test_a_request_in_progress_is_retried_with_the_same_key(stripe, flow):
    handoff = flow.approve(1, customer("Northwind"))
    stripe.faults(in_progress={handoff.action_key: 1})
    [done] = drive(handoff)
    assert done.state == "delivered"
    assert stripe.effects() == {handoff.action_key: 1}


def test_a_wrong_secret_key_pauses_this_destination_alone(stripe, flow, monkeypatch, tmp_path):
    monkeypatch.setenv(TOKEN_ENV, "sk_test_mistyped")
    refused = flow.approve(1, customer("Northwind"))
    sweep_until(lambda: paused_by_its_credential("stripe-customers"), what="stripe paused")

    waiting = stored(refused)
    assert waiting.state == S.PENDING and not went_to_a_person(waiting)
    assert (waiting.failure_class, waiting.reason_code) == ("credential", "credential_rejected")
    assert "Invalid API Key" in waiting.last_error and stripe.effects() == {}
    with neighbour("postmark", flow.world, monkeypatch, tmp_path) as deliver_one:
        deliver_one()  # another destination keeps delivering meanwhile
    assert not paused_by_its_credential("postmark-mail")

    monkeypatch.setenv(TOKEN_ENV, TOKEN)  # fixed: the breaker's probe resumes it
    [done] = drive(refused)
    assert done.state == S.DELIVERED
    assert stripe.effects() == {refused.action_key: 1}


def test_the_customer_is_the_work_and_the_requester_reads_done(stripe, flow):
    [created] = drive(flow.approve(1, customer("Northwind")))
    assert created.work_status == "done", "done with its delivery, nothing to pull"
    assert requester_reads(flow.world, 1).endswith("done: the work of every step is done")
    assert stripe.effects() == {created.action_key: 1}


def test_an_undo_deletes_the_customer_once_even_when_its_answer_is_lost(stripe, flow):
    [step] = drive(flow.approve(1, customer("Northwind")))
    instance_compensate(
        instance_key=step.instance_key, actor=flow.world["olga"], reason="client withdrew"
    )
    stripe.drop_next()  # the DELETE removes the customer; its answer is lost
    [undo] = Handoff.objects.filter(kind=HandoffKind.COMPENSATION)
    [undone] = drive(undo)

    assert undone.state == S.DELIVERED and not went_to_a_person(undone)
    assert stripe.effects() == {}, "the customer is gone: zero effects for the key"
    deletes = [r["path"] for r in stripe.requests("DELETE")]
    assert deletes == [f"/v1/customers/{step.destination_id}"] * 2, "sent again: 404, gone"
    assert len(stripe.requests("POST")) == 1, "an undo is never a second create"
