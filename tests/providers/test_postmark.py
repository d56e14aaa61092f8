"""A Postmark-style e-mail API (`tests/providers/postmark.py`, a process of its own): no idempotency at all,
its sent messages searchable by metadata; reached by `files/postmark.destinations.json` and
`files/postmark.workflows.json` alone. The attempts ledger decides what is sent; an unknown outcome is
settled by the search, never by sending again."""

import pytest

from outbox.models import Attempt, HandoffState
from tests.factories import onboarding_world
from tests.providers.harness import ProviderProcess
from tests.providers.scenario import Flow, acceptance_000, apply_files, drive, went_to_a_person

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
TOKEN = "server-token-handoff"
S = HandoffState


@pytest.fixture
def postmark(monkeypatch, tmp_path):
    monkeypatch.setenv("HANDOFF_DEST_POSTMARK_SERVER_TOKEN", TOKEN)
    provider = ProviderProcess("postmark", token=TOKEN)
    try:
        apply_files("postmark", provider.url, tmp_path)
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def flow():
    return Flow(world=onboarding_world(), workflow="welcome_mail")


def welcome(to: str, subject: str = "Welcome to Handoff") -> dict:
    return {
        "From": "welcome@handoff.example",
        "To": to,
        "Subject": subject,
        "TextBody": "Your account is ready.",
    }


def test_seed_000_at_an_api_without_idempotency_one_message_per_key(postmark, flow):
    lost, _, _ = acceptance_000(
        postmark,
        flow,
        welcome("ada@northwind.example"),
        welcome("ada@northwind.example", subject="Welcome, Northwind Traders"),
        welcome("grace@contoso.example"),
    )
    assert lost.receipt["found_by"] == "lookup", "found by its metadata, never sent twice"
    assert list(Attempt.objects.filter(handoff=lost).values_list("outcome", flat=True)) == [
        "uncertain"
    ]
    assert len(postmark.requests("POST")) == 3


def test_an_unknown_outcome_not_found_goes_to_a_person_and_nothing_is_sent_again(postmark, flow):
    """The call fails after sending, and the message is not (yet) listed: without idempotency nothing may
    be sent again by itself."""
    handoff = flow.approve(1, welcome("ada@northwind.example"))
    postmark.faults(lose_message=1)
    [waiting] = drive(handoff)
    assert waiting.state == S.NEEDS_ATTENTION and went_to_a_person(waiting)
    assert waiting.reason_code == "uncertain_not_idempotent"
    assert len(postmark.requests("POST")) == 1
