"""A refused credential at one of three destinations (the Idempotency-Key ledger's bearer token) pauses that
destination only, with one page naming it; the bundled receiver and the SMTP server keep delivering, and the
handoffs waiting for the paused one spend nothing. Once the token in the environment is right again (read at
the next call, no restart) and the destination resumes (an operator asks for a probe now; the probe's
success resumes it), its waiting handoffs drain by themselves and each workflow finishes. Both backends,
every write committed."""

from collections import Counter
from email.header import decode_header, make_header
from types import SimpleNamespace

import pytest

from incidents.models import Incident, IncidentKind, IncidentState
from outbox.destinations.registry import destination_named
from outbox.dispatch.dispatcher import drain
from outbox.models import (
    Attempt,
    AttemptOutcome,
    DestinationEvent,
    DestinationHealth,
    DestinationState,
    FailureClass,
    Handoff,
    HandoffState,
    PauseReason,
)
from outbox.selectors import instance_handoffs
from outbox.services.breaker import destination_resume
from tests.acceptance.three_destinations import (
    ACCOUNTS,
    ACCOUNTS_TOKEN,
    ACCOUNTS_TOKEN_ENV,
    CRM,
    MAIL,
    approve,
    drive,
    instance_key,
    paused_destinations,
    step_key,
    three_destinations,
)
from tests.factories import three_step_onboarding_world
from tests.incidents.engine import alerts_send_due

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
D = DestinationState


@pytest.fixture
def world():
    return three_step_onboarding_world()


@pytest.fixture
def servers(world, live_server, settings, monkeypatch, tmp_path):
    settings.ALERT_EMAILS = ["oncall@example.com"]
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.ALERT_WEBHOOK_URL = ""
    # No probe comes by itself while the test looks at the pause: it resumes when the operator asks.
    settings.HANDOFF_BREAKER_PROBE_BASE = 600
    with three_destinations(
        live_server=live_server, settings=settings, monkeypatch=monkeypatch, directory=tmp_path
    ) as servers:
        # The incidents' e-mail channel (ALERT_EMAILS) is a destination too: the same SMTP server.
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", servers.mailbox.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        yield servers


def steps_of(number: int) -> list[tuple[str, str]]:
    return [(h.destination, h.state) for h in instance_handoffs(instance_key(number))]


def alert_mails(servers) -> list[SimpleNamespace]:
    """The incidents' e-mails the SMTP server took (the welcome packs are its other messages)."""
    mails = []
    for message in servers.mailbox.messages():
        subject = " ".join(str(make_header(decode_header(message["Subject"]))).split())
        if subject.startswith("[handoff] "):
            body = message.get_payload(decode=True).decode()
            mails.append(SimpleNamespace(subject=subject, to=[message["To"]], body=body))
    return mails


def pages(servers) -> list[SimpleNamespace]:
    return [m for m in alert_mails(servers) if m.subject.startswith("[handoff] PAGE:")]


def test_a_refused_token_pauses_only_its_destination_with_one_page_and_drains_after_the_fix(
    world, servers, monkeypatch
):
    # Instance 60 is past its account step when the token goes wrong: its welcome pack waits for the mail
    # server's loop (each destination has its own in the dispatcher process).
    approve(world, 60)
    drain(destination=destination_named(CRM))
    drain(destination=destination_named(ACCOUNTS))
    assert steps_of(60)[-1] == (MAIL, S.PENDING)

    monkeypatch.setenv(ACCOUNTS_TOKEN_ENV, "a-token-the-ledger-does-not-take")
    approve(world, 61)
    approve(world, 62)
    drive()

    # The ledger refused one call; its destination alone is paused, for its credentials.
    assert paused_destinations() == [ACCOUNTS]
    health = DestinationHealth.objects.get(name=ACCOUNTS)
    assert (
        health.pause_reason == PauseReason.CREDENTIAL and "credential_rejected" in health.last_error
    )
    refused = [r for r in servers.ledger.state()["requests"] if r["method"] == "POST"]
    assert [r["authorization"] for r in refused] == [
        f"Bearer {ACCOUNTS_TOKEN}",
        "Bearer a-token-the-ledger-does-not-take",
    ], "one account for 60 before, then one refused call: the rest wait without calling"
    # The other two kept delivering: 61's and 62's clients at the receiver, 60's welcome pack by mail.
    assert steps_of(60) == [(CRM, S.DELIVERED), (ACCOUNTS, S.DELIVERED), (MAIL, S.DELIVERED)]
    for number in (61, 62):
        assert steps_of(number) == [(CRM, S.DELIVERED), (ACCOUNTS, S.PENDING)]
    assert len(servers.mailbox.messages()) == 1
    # Waiting at the paused destination spends nothing and needs no person.
    waiting = Handoff.objects.filter(destination=ACCOUNTS, state=S.PENDING)
    assert sorted(waiting.values_list("failure_class", flat=True)) == ["", FailureClass.CREDENTIAL]
    attempts = Attempt.objects.filter(handoff__in=waiting).order_by("handoff_id")
    assert [(a.outcome, a.reason_code) for a in attempts] == [
        (AttemptOutcome.FAILED, "credential_rejected"),
        (AttemptOutcome.SKIPPED, ""),  # claimed in the same batch, given back unsent
    ]
    # A refused credential is the destination's problem: neither handoff spent its retry allowance.
    assert [h.attempts_in_run for h in waiting] == [0, 0]

    # One page naming the destination, however many times the alert sweep runs while it lasts.
    alerts_send_due()
    approve(world, 63)  # the receiver still takes new work meanwhile
    drive()
    alerts_send_due()
    assert steps_of(63) == [(CRM, S.DELIVERED), (ACCOUNTS, S.PENDING)]
    [incident] = Incident.objects.all()
    assert (incident.kind, incident.destination, incident.failure_class) == (
        IncidentKind.DESTINATION,
        ACCOUNTS,
        PauseReason.CREDENTIAL,
    )
    [page] = pages(servers)
    assert page.subject.startswith(
        f"[handoff] PAGE: incident {incident.pk}: Destination {ACCOUNTS} paused: credentials refused"
    )
    assert page.to == ["oncall@example.com"]
    # What to do names this destination's credentials, not the bundled receiver's signing secret.
    assert f"check the credentials of destination {ACCOUNTS}" in page.body
    assert "signing secret" not in page.body
    assert len(servers.ledger.creates()) == 2, "no call to the paused destination meanwhile"

    # The token is right again (read at the next call, nothing restarted); an operator asks for a probe.
    monkeypatch.setenv(ACCOUNTS_TOKEN_ENV, ACCOUNTS_TOKEN)
    assert destination_resume(name=ACCOUNTS, actor_label="olga") == D.PAUSED
    drive()

    assert paused_destinations() == []
    for number in (60, 61, 62, 63):
        assert steps_of(number) == [
            (CRM, S.DELIVERED),
            (ACCOUNTS, S.DELIVERED),
            (MAIL, S.DELIVERED),
        ], number
    # One effect per key at each destination.
    for number in (60, 61, 62, 63):
        assert servers.receiver_tasks(step_key(number, "create_client")) == 1
        assert len(servers.ledger_entries(step_key(number, "provision_account"))) == 1
        assert len(servers.messages(step_key(number, "send_welcome_pack"))) == 1
    assert Counter(r["key"] for r in servers.ledger.creates()) == {
        step_key(60, "provision_account"): 1,
        step_key(61, "provision_account"): 2,  # refused, then accepted
        step_key(62, "provision_account"): 1,
        step_key(63, "provision_account"): 1,
    }
    # The pause and the resume are the paused destination's events only; still one page.
    moves = DestinationEvent.objects.exclude(to_state="").exclude(
        from_state=D.PAUSED, to_state=D.PAUSED
    )
    assert sorted((e.destination, e.from_state, e.to_state) for e in moves) == [
        (ACCOUNTS, D.ACTIVE, D.PAUSED),
        (ACCOUNTS, D.PAUSED, D.ACTIVE),
    ]
    alerts_send_due()
    assert len(pages(servers)) == 1
    # The incident resolved when the destination resumed, and still says what the cause was.
    [incident] = Incident.objects.all()
    assert incident.state == IncidentState.RESOLVED
    assert "credential_rejected" in incident.evidence_first
    assert f"{health.paused_at:%Y-%m-%d %H:%M:%S}" in incident.evidence_first
    assert f"credentials: ${ACCOUNTS_TOKEN_ENV}" in incident.evidence_first
    assert [m.subject for m in alert_mails(servers) if "RESOLVED" in m.subject] == [
        f"[handoff] RESOLVED: incident {incident.pk}: {incident.title}"
    ]

    # The token goes wrong again ten minutes later: a second pause, a second incident, a second page.
    monkeypatch.setenv(ACCOUNTS_TOKEN_ENV, "a-token-the-ledger-does-not-take")
    approve(world, 64)
    drive()
    assert paused_destinations() == [ACCOUNTS]
    alerts_send_due()
    second = Incident.objects.exclude(pk=incident.pk).get()
    assert (second.kind, second.destination) == (IncidentKind.DESTINATION, ACCOUNTS)
    assert [p.subject.split(":")[1] for p in pages(servers)] == [
        f" incident {incident.pk}",
        f" incident {second.pk}",
    ]
