"""A Stripe-style API (`tests/providers/stripe.py`, a process of its own): the key in the Idempotency-Key
header, reached by `files/stripe.destinations.json` and `files/stripe.workflows.json` alone. It has no
lookup: a lost answer is settled by sending the same request with the same key, which replays."""

import pytest

from outbox.models import Attempt
from tests.factories import onboarding_world
from tests.providers.harness import ProviderProcess
from tests.providers.scenario import Flow, acceptance_000, apply_files, drive

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
TOKEN = "sk_test_handoff"


@pytest.fixture
def stripe(monkeypatch, tmp_path):
    monkeypatch.setenv("HANDOFF_DEST_STRIPE_SECRET_KEY", TOKEN)
    provider = ProviderProcess("stripe", token=TOKEN)
    try:
        apply_files("stripe", provider.url, tmp_path)
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def flow():
    return Flow(world=onboarding_world(), workflow="billing_customer")


def customer(name: str) -> dict:
    return {"name": name, "email": "billing@northwind.example"}


def test_seed_000_at_a_key_header_api_one_customer_per_key(stripe, flow):
    lost, _, _ = acceptance_000(
        stripe, flow, customer("Northwind"), customer("Northwind Traders"), customer("Contoso")
    )
    # Settled by a repeat with the same key, which the API replayed: one customer, the same id.
    outcomes = Attempt.objects.filter(handoff=lost).order_by("number")
    assert list(outcomes.values_list("outcome", flat=True)) == ["uncertain", "duplicate"]
    keys = [r["path"] for r in stripe.requests("POST")]
    assert len(keys) == 4, "three creates and one repeat"


def test_a_request_in_progress_is_retried_with_the_same_key(stripe, flow):
    handoff = flow.approve(1, customer("Northwind"))
    stripe.faults(in_progress={handoff.action_key: 1})
    [done] = drive(handoff)
    assert done.state == "delivered"
    assert stripe.effects() == {handoff.action_key: 1}
