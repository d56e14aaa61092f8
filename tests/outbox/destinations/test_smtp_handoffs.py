"""The smtp kind's acceptance scenario, with real handoffs through the dispatcher, sweep and settlement, and a
real SMTP server in a process of its own whose mailbox is counted: a welcome pack is sent exactly once; an
answer lost after DATA is uncertain, goes to a person with the evidence and is never sent again
automatically; the person's manual settle after checking the mailbox records it; a refusal before DATA is
retried and then delivered once; a later distinct handoff is a distinct message."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.destinations.smtp.destination import SmtpDestination
from outbox.dispatch.dispatcher import dispatch_batch, sweep
from outbox.errors import RiskNotConfirmed
from outbox.models import Attempt, AttemptOutcome, FailureClass, Handoff, HandoffState
from outbox.services import (
    handoff_claim_due,
    handoff_retry,
    handoff_settle,
    handoff_settle_manually,
)
from tests.factories import ONBOARDING_PAYLOAD, HandoffFactory, make_user
from tests.outbox.destinations.smtp_server import SmtpServer

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
NAME = "welcome-mail"


@pytest.fixture
def server(tmp_path):
    server = SmtpServer(tmp_path / "smtp")
    yield server
    server.stop()


def mail_destination(port: int) -> SmtpDestination:
    return SmtpDestination.from_config(
        {
            "name": NAME,
            "host": "127.0.0.1",
            "port": port,
            "security": "none",
            "from_address": "welcome@handoff.example",
            "to": "contact_email",
            "subject": "Welcome to Handoff, $client_name",
            "body": "Hello $client_name,\n\nyour $plan plan is ready.\n",
            "timeout": 5,
            "retry": {"base_delay": 0, "max_delay": 0},
        }
    )


@pytest.fixture
def mail(server) -> SmtpDestination:
    return mail_destination(server.port)


def welcome_pack(number: int) -> Handoff:
    return HandoffFactory(
        number=number,
        action_key=f"onboarding:7:{number}:1:send_welcome_pack",
        destination=NAME,
        payload={**ONBOARDING_PAYLOAD, "client_name": f"Client {number}"},
    )


def state_of(handoff: Handoff) -> Handoff:
    return Handoff.objects.get(pk=handoff.pk)


def everything_automatic(mail: SmtpDestination) -> None:
    """Every automatic path that could send a handoff again: dispatch, sweep (leases, drain, settlement),
    and settlement asked directly."""
    for _ in range(3):
        dispatch_batch(destination=mail)
        sweep(destination=mail)
    for pk in Handoff.objects.filter(destination=NAME).values_list("pk", flat=True):
        handoff_settle(handoff_id=pk, destination=mail)


def test_welcome_packs_are_each_sent_exactly_once_through_lost_answers_refusals_and_settlement(
    server, mail
):
    olga = make_user("olga")

    # 1. A welcome pack goes out once, its Message-ID derived from its action key, and stays delivered.
    first = welcome_pack(1)
    assert dispatch_batch(destination=mail).delivered == 1
    first = state_of(first)
    assert first.state == S.DELIVERED
    assert first.destination_id == mail.message_id(first.action_key)
    assert server.message_ids() == [mail.message_id(first.action_key)]

    # 2. The server keeps the second one and closes the connection without answering the data.
    server.faults(data_end="drop")
    lost = welcome_pack(2)
    assert dispatch_batch(destination=mail).needs_attention == 1
    server.faults()
    lost = state_of(lost)
    assert (lost.state, lost.failure_class, lost.reason_code) == (
        S.NEEDS_ATTENTION,
        FailureClass.UNCERTAIN,
        "uncertain_not_idempotent",
    )
    assert lost.awaits_receiver_check and lost.manual_settle_applies
    local, domain = mail.message_id(lost.action_key).strip("<>").split("@")
    # The evidence the person starts from: the Message-ID, the key's header, the server's last reply.
    assert f"Message-ID {local} at {domain}" in lost.last_error
    assert lost.action_key in lost.last_error and "last reply: 354" in lost.last_error
    # Nothing automatic sends it again, and a person's retry must confirm the risk first.
    everything_automatic(mail)
    with pytest.raises(RiskNotConfirmed):
        handoff_retry(handoff_id=lost.pk, actor=olga)
    assert state_of(lost).state == S.NEEDS_ATTENTION
    assert len(server.messages()) == 2

    # 3. The person finds the message in the mailbox by its Message-ID and settles it as delivered.
    found = [m for m in server.messages() if m["X-Handoff-Action-Key"] == lost.action_key]
    assert [m["Message-ID"] for m in found] == [mail.message_id(lost.action_key)]
    handoff_settle_manually(
        handoff_id=lost.pk,
        actor=olga,
        receiver_task_id=found[0]["Message-ID"],
        reason="found in the mailbox by its Message-ID",
    )
    lost = state_of(lost)
    assert (lost.state, lost.destination_id) == (S.DELIVERED, mail.message_id(lost.action_key))
    everything_automatic(mail)

    # 4. A recipient refused for now before DATA: nothing sent, retried, then delivered once.
    server.faults(rcpt="451 4.3.0 mailbox busy, try again later")
    refused = welcome_pack(3)
    assert dispatch_batch(destination=mail).retrying == 1
    assert state_of(refused).reason_code == "smtp_451"
    assert len(server.messages()) == 2
    server.faults()
    assert dispatch_batch(destination=mail).delivered == 1
    assert state_of(refused).destination_id == mail.message_id(refused.action_key)

    # 5. A later, distinct handoff is a distinct message.
    later = welcome_pack(4)
    dispatch_batch(destination=mail)
    everything_automatic(mail)
    handoffs = [first, lost, refused, later]
    assert [state_of(h).state for h in handoffs] == [S.DELIVERED] * 4
    assert Counter(server.message_ids()) == {mail.message_id(h.action_key): 1 for h in handoffs}
    assert [m["X-Envelope-To"] for m in server.messages()] == [
        ONBOARDING_PAYLOAD["contact_email"]
    ] * 4


def test_a_person_who_found_nothing_in_the_mailbox_lets_it_be_sent_once_more(server, mail):
    server.faults(data_end="drop_unstored")
    handoff = welcome_pack(1)
    dispatch_batch(destination=mail)
    server.faults()
    assert state_of(handoff).state == S.NEEDS_ATTENTION
    everything_automatic(mail)
    assert server.messages() == []

    handoff_settle_manually(
        handoff_id=handoff.pk,
        actor=make_user("olga"),
        receiver_task_id="",
        reason="no message with this Message-ID in the mailbox",
    )
    assert state_of(handoff).state == S.PENDING
    assert dispatch_batch(destination=mail).delivered == 1
    everything_automatic(mail)
    assert server.message_ids() == [mail.message_id(handoff.action_key)]
    attempts = list(Attempt.objects.filter(handoff=handoff).order_by("number"))
    assert [a.outcome for a in attempts] == [AttemptOutcome.UNCERTAIN, AttemptOutcome.CREATED]


def test_a_lease_that_ran_out_mid_call_goes_to_a_person_and_nothing_is_sent_again(server, mail):
    handoff = welcome_pack(1)
    # A worker claimed it and was never heard of again (its call may have reached the server).
    assert len(handoff_claim_due(worker="dead", destination_name=NAME)) == 1
    Handoff.objects.filter(pk=handoff.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    sweep(destination=mail)
    handoff = state_of(handoff)
    assert (handoff.state, handoff.failure_class, handoff.reason_code) == (
        S.NEEDS_ATTENTION,
        FailureClass.UNCERTAIN,
        "lookup_unsupported",
    )
    assert handoff.awaits_receiver_check
    everything_automatic(mail)
    assert server.messages() == []
    handoff_settle_manually(
        handoff_id=handoff.pk,
        actor=make_user("olga"),
        receiver_task_id="",
        reason="nothing in the mailbox for this key",
    )
    dispatch_batch(destination=mail)
    assert server.message_ids() == [mail.message_id(handoff.action_key)]


def test_a_refused_connection_is_retried_and_then_delivered_once(server, mail, tmp_path):
    server.stop(keep_port=True)
    handoff = welcome_pack(1)
    assert dispatch_batch(destination=mail).retrying == 1
    assert state_of(handoff).reason_code == "connect_failed"
    back = SmtpServer(tmp_path / "smtp", port=server.held)
    try:
        assert dispatch_batch(destination=mail).delivered == 1
        everything_automatic(mail)
        assert back.message_ids() == [mail.message_id(handoff.action_key)]
    finally:
        back.stop()


def test_a_missing_payload_field_is_permanent_naming_it_and_sends_nothing(server, mail):
    handoff = HandoffFactory(
        number=1,
        destination=NAME,
        payload={k: v for k, v in ONBOARDING_PAYLOAD.items() if k != "contact_email"},
    )
    assert dispatch_batch(destination=mail).needs_attention == 1
    handoff = state_of(handoff)
    assert (handoff.state, handoff.failure_class, handoff.reason_code) == (
        S.NEEDS_ATTENTION,
        FailureClass.PERMANENT,
        "payload_field_missing",
    )
    assert "'contact_email'" in handoff.last_error
    assert server.messages() == []
