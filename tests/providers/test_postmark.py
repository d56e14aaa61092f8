"""A Postmark-style e-mail API (`tests/providers/postmark.py`, a process of its own): no idempotency at all,
its sent messages searchable by metadata; reached by `files/postmark.destinations.json` and
`files/postmark.workflows.json` alone, the approved payload mapped onto Postmark's own fields (`From`, `To`,
`Subject`, `TextBody`, `MessageStream`). The attempts ledger decides what is sent; an unknown outcome is
settled by the search, never by sending again.

An undo does not apply: an e-mail sent cannot be unsent, and Postmark has no call that recalls one. The step
says `"undo": "manual"`: compensating it gives a person the residual (which message, which key), never a
second send. Its work status is "delivered": the e-mail sent is the work."""

import pytest

from outbox.dispatch.dispatcher import sweep
from outbox.models import Attempt, CompensationState, Handoff, HandoffKind, HandoffState
from outbox.selectors import instance_handoffs, instance_status
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
TOKEN = "server-token-handoff"
TOKEN_ENV = "HANDOFF_DEST_POSTMARK_SERVER_TOKEN"
S = HandoffState


@pytest.fixture
def postmark(monkeypatch, tmp_path):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    provider = ProviderProcess("postmark", token=TOKEN)
    try:
        apply_files("postmark", provider.url, tmp_path)
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def flow():
    return Flow(world=onboarding_world(), workflow="welcome_mail")


def welcome(client: str, to: str) -> dict:
    return {"client_name": client, "contact_email": to}


def test_seed_000_at_an_api_without_idempotency_one_message_per_key(postmark, flow):
    lost, _, _ = acceptance_000(
        postmark,
        flow,
        welcome("Northwind", "ada@northwind.example"),
        welcome("Northwind Traders", "ada@northwind.example"),
        welcome("Contoso", "grace@contoso.example"),
    )
    assert lost.receipt["found_by"] == "lookup", "found by its metadata, never sent twice"
    assert list(Attempt.objects.filter(handoff=lost).values_list("outcome", flat=True)) == [
        "uncertain"
    ]
    sent = [r["body"] for r in postmark.requests("POST")]
    assert len(sent) == 3
    # Mapped onto Postmark's own fields; the key and the hash ride in its Metadata.
    assert {k: v for k, v in sent[1].items() if k != "Metadata"} == {
        "From": "welcome@handoff.example",
        "To": "ada@northwind.example",
        "Subject": "Welcome to Handoff, Northwind Traders",
        "TextBody": "Hello Northwind Traders, your account is ready.",
        "MessageStream": "outbound",
    }
    assert set(sent[1]["Metadata"]) == {"handoff_key", "handoff_payload_hash"}


def test_an_unknown_outcome_not_found_goes_to_a_person_and_nothing_is_sent_again(postmark, flow):
    """The call fails after sending, and the message is not (yet) listed: without idempotency nothing may
    be sent again by itself."""
    handoff = flow.approve(1, welcome("Northwind", "ada@northwind.example"))
    postmark.faults(lose_message=1)
    [waiting] = drive(handoff)
    assert waiting.state == S.NEEDS_ATTENTION and went_to_a_person(waiting)
    assert waiting.reason_code == "uncertain_not_idempotent"
    assert len(postmark.requests("POST")) == 1


def test_a_bad_server_token_pauses_this_destination_alone(postmark, flow, monkeypatch, tmp_path):
    """Postmark answers 401 with ErrorCode 10; nothing was sent, so the message goes once the token is
    fixed (read at the next call, no restart)."""
    monkeypatch.setenv(TOKEN_ENV, "server-token-mistyped")
    refused = flow.approve(1, welcome("Northwind", "ada@northwind.example"))
    sweep_until(lambda: paused_by_its_credential("postmark-mail"), what="postmark paused")

    waiting = stored(refused)
    assert waiting.state == S.PENDING and not went_to_a_person(waiting)
    assert (waiting.failure_class, waiting.reason_code) == ("credential", "credential_rejected")
    assert "ErrorCode" in waiting.last_error and postmark.effects() == {}
    with neighbour("stripe", flow.world, monkeypatch, tmp_path) as deliver_one:
        deliver_one()  # another destination keeps delivering meanwhile
    assert not paused_by_its_credential("stripe-customers")

    monkeypatch.setenv(TOKEN_ENV, TOKEN)  # fixed: the breaker's probe resumes it
    [done] = drive(refused)
    assert done.state == S.DELIVERED
    assert postmark.effects() == {refused.action_key: 1}


def test_the_email_sent_is_the_work_and_the_requester_reads_done(postmark, flow):
    [sent] = drive(flow.approve(1, welcome("Northwind", "ada@northwind.example")))
    assert sent.work_status == "done", "done with its delivery, nothing to pull"
    assert requester_reads(flow.world, 1).endswith("done: the work of every step is done")
    assert postmark.effects() == {sent.action_key: 1}
    assert postmark.requests("GET") == [], "never asked about it"


def test_an_undo_of_a_sent_email_is_a_residual_for_a_person_never_a_second_send(postmark, flow):
    [sent] = drive(flow.approve(1, welcome("Northwind", "ada@northwind.example")))
    plan = instance_compensate(
        instance_key=sent.instance_key, actor=flow.world["olga"], reason="client withdrew"
    )
    sweep()

    assert plan.reverse == [] and [h.pk for h in plan.residual] == [sent.pk]
    reason = plan.residual_reason(sent)
    assert sent.destination_id in reason and sent.action_key in reason
    assert stored(sent).compensation_state == CompensationState.RESIDUAL
    assert not Handoff.objects.filter(kind=HandoffKind.COMPENSATION).exists()
    assert instance_status(instance_handoffs(sent.instance_key)) == "needs a person"
    assert len(postmark.requests("POST")) == 1, "never a second send"
    assert postmark.effects() == {sent.action_key: 1}, "the message stays sent"
