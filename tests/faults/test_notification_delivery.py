"""An incident's notifications ride the outbox's engine: a page to a Standard Webhooks receiver, PagerDuty
Events v2 and an SMTP server (each a process of its own that records what it receives and what it did),
with the first answer lost and a dispatcher SIGKILLed while a channel holds its answer. The dispatchers
(real processes) claim, lease, fence, retry and settle the notifications' handoffs; each notification id
has exactly one effect per channel: the webhook processed once per `webhook-id`, one PagerDuty alert
opened and resolved per `dedup_key`, one message per Message-ID.

Fails on the code before: notifications were sent by the alert sweep's own loop, in the sweeping process (the
test's here): no dispatcher ever claimed one, no notification had a handoff, and the wait for the page's
handoffs to be settled times out."""

import os
import signal
from collections import Counter

import pytest

from incidents.models import AlertChannel, ChannelKind, Incident, IncidentState, Notification
from incidents.sweep import alerts_send_due
from outbox.destinations.smtp.destination import message_id_for
from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffState
from outbox.services import handoff_cancel, handoff_record
from tests.faults.conftest import START_DEADLINE_SECONDS
from tests.faults.test_dispatch_faults import wait_until
from tests.incidents.channel_servers import ChannelServers
from tests.incidents.test_incidents import SECRET

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
ROUTING_KEY = "R0UTINGKEY0000000000000000000001"
REJECTED = {"client_name": " ", "plan": "standard"}
FAILURES = 3
S = HandoffState
SETTLED = (S.DELIVERED, S.NEEDS_ATTENTION, S.CANCELLED)
# The channels' secrets, where the dispatchers read them (the channel names the variable).
SECRETS = {"NOTIFY_WEBHOOK_SECRET": SECRET, "NOTIFY_ROUTING_KEY": ROUTING_KEY}
# A lease that outlives a notification's call (twice ALERT_NOTIFICATION_TIMEOUT_SECONDS).
DISPATCHER = {"HANDOFF_LEASE_SECONDS": "30", **SECRETS}


@pytest.fixture(autouse=True)
def _alert_settings(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    settings.ALERT_NOTIFICATION_TIMEOUT_SECONDS = 10
    settings.ALERT_NOTIFY_DELAY_SECONDS = {"page": 0, "queue": 0}
    settings.ALERT_WIDESPREAD_THRESHOLD = FAILURES
    settings.CONSOLE_BASE_URL = "https://console.example"
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def channels():
    servers = ChannelServers(secret=SECRET, routing_key=ROUTING_KEY)
    yield servers
    servers.stop()


def channels_create(channels: ChannelServers) -> None:
    for name, kind, target, secret_env in (
        ("webhook", ChannelKind.WEBHOOK, f"{channels.url}/webhook", "NOTIFY_WEBHOOK_SECRET"),
        ("pagerduty", ChannelKind.PAGERDUTY, f"{channels.url}/v2/enqueue", "NOTIFY_ROUTING_KEY"),
        ("mail", ChannelKind.EMAIL, "oncall@example.com", ""),
    ):
        AlertChannel.objects.create(
            workspace_id=7, name=name, kind=kind, target=target, secret_env=secret_env
        )


def failing(n: int) -> Handoff:
    return handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref=f"request {n} revision 1",
        source_id=n,
        action_key=f"onboarding:7:{n}:1",
        payload=REJECTED,
    )


def swept() -> bool:
    alerts_send_due()
    return True


def notifications_settled(count: int) -> bool:
    """`count` notifications' handoffs, none of them open (delivered, or a person's)."""
    handoffs = Handoff.objects.filter(workflow="incident_notifications")
    return handoffs.count() == count and not handoffs.exclude(state__in=SETTLED).exists()


def test_lost_answers_and_a_dispatcher_killed_mid_send_give_one_delivery_per_notification_and_channel(
    processes, channels, mailbox
):
    processes.start_receiver()
    handoffs = [failing(n) for n in range(1, FAILURES + 1)]
    victim = processes.start_dispatcher("victim", **DISPATCHER)
    wait_until(
        lambda: (
            Handoff.objects.filter(workflow="onboarding", state=S.NEEDS_ATTENTION).count()
            == FAILURES
        ),
        timeout=START_DEADLINE_SECONDS,
        what="the handoffs to fail for one cause",
        procs=[victim],
    )
    channels_create(channels)
    # The first channel call's answer is lost, the second's held; the e-mail's answer after DATA is lost.
    channels.faults(lose_first=1, hold=1)
    mailbox.faults(data_end="drop")
    # The sweep (django-q2's, here) opens the incident and queues its page; the dispatcher sends it.
    wait_until(
        lambda: swept() and channels.state()["held"] == 1,
        timeout=START_DEADLINE_SECONDS,
        what="a dispatcher's call to a channel to be held",
        procs=[victim],
    )
    [incident] = Incident.objects.filter(workspace_id=7, cause__startswith="failures:receiver:")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    channels.faults(release=True)
    mailbox.faults(data_end="")

    survivor = processes.start_dispatcher("survivor", **DISPATCHER)
    wait_until(
        lambda: notifications_settled(3),
        timeout=120,
        what="the page to be settled at every channel",
        procs=[survivor],
    )
    for handoff in handoffs:
        handoff_cancel(handoff_id=handoff.pk, actor=None, reason="the request was a duplicate")
    # The incident resolves by itself: its resolve is queued to the channels told.
    wait_until(
        lambda: swept() and notifications_settled(6),
        timeout=120,
        what="the resolve to be delivered at every channel",
        procs=[survivor],
    )
    processes.stop_all()

    assert Incident.objects.get(pk=incident.pk).state == IncidentState.RESOLVED
    state = channels.state()
    effects = Counter((e["channel"], e["id"], e["effect"]) for e in state["effects"])
    page, resolve = f"incident-{incident.pk}-1", f"incident-{incident.pk}-2"
    dedup_key = f"handoff-incident-{incident.pk}"
    assert effects == {
        ("webhook", page, "processed"): 1,
        ("webhook", resolve, "processed"): 1,
        ("pagerduty", dedup_key, "opened"): 1,
        ("pagerduty", dedup_key, "resolved"): 1,
    }, state["effects"]
    assert len(state["received"]) >= len(effects) + 2, "the lost and the held one came again"
    # Every notification went through the outbox's engine: a handoff to its channel's destination.
    notifications = list(Notification.objects.filter(incident=incident))
    assert len(notifications) == 6 and all(n.handoff_id for n in notifications)
    # E-mail: at most one message per Message-ID, never sent again. A message the server lacks (the dispatcher
    # killed before its DATA ended) or whose answer was lost is with a person; the resolve went once.
    ids = Counter(mailbox.message_ids())
    assert set(ids.values()) <= {1}, ids
    mails = [n.handoff_id for n in notifications if n.channel.kind == ChannelKind.EMAIL]
    for handoff in Handoff.objects.filter(pk__in=mails):
        there = ids[message_id_for(handoff.action_key, "handoff-console")]
        assert handoff.state in (S.DELIVERED, S.NEEDS_ATTENTION), handoff.state
        assert there == 1 or handoff.state == S.NEEDS_ATTENTION, (handoff.action_key, there)
    resolve_mail = Notification.objects.get(
        incident=incident, number=2, channel__kind=ChannelKind.EMAIL
    )
    resolve_handoff = Handoff.objects.get(pk=resolve_mail.handoff_id)
    assert resolve_handoff.state == S.DELIVERED
    assert ids[message_id_for(resolve_handoff.action_key, "handoff-console")] == 1
    victims = Attempt.objects.filter(handoff__workflow="incident_notifications", worker="victim")
    assert victims.exclude(outcome=AttemptOutcome.CREATED).exists(), "killed in mid-call"
    assert not Handoff.objects.filter(
        workflow="incident_notifications", state__in=(S.PENDING, S.IN_FLIGHT, S.UNCERTAIN)
    ).exists()
