"""Paging what does not heal, and only while it lasts (issue 36, items 2-4), on PostgreSQL with real
processes (the receiver under gunicorn, dispatchers) and local servers of alerts that record what they
receive. The dispatchers call the receiver through a gate (tests/processes.py) that refuses connections for an
outage, as a stopped receiver's port does, and passes them on again after it: one receiver process a test,
not one more start (a gunicorn importing Django) for each outage's end. The dispatcher's breaker pauses the
destination and its probes resume it. The alert sweep is run by the test, polled with
deadlines; the page delay and the escalation are set to seconds."""

import os
import signal

import pytest

from incidents.channels.delivery import (
    channel_destination_sync,
    notifications_deliver_now,
)
from incidents.models import (
    AlertChannel,
    ChannelKind,
    EscalationPolicy,
    Incident,
    IncidentKind,
    IncidentMember,
    IncidentState,
    Notification,
    NotificationState,
)
from incidents.services.incidents import incidents_sync
from outbox.models import DestinationHealth, DestinationState, Handoff, HandoffState
from outbox.services import handoff_record
from tests.faults.test_dispatch_faults import wait_until
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import SECRET
from tests.processes import Gate

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
ROUTING_KEY = "R0UTINGKEY0000000000000000000000"
REJECTED = {"client_name": " ", "plan": "standard"}
OUTAGE = {"HANDOFF_MAX_ATTEMPTS": "", "RECEIVER_CONNECT_TIMEOUT": "0.5"}


@pytest.fixture(autouse=True)
def _alert_settings(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    # The channels' destinations are served by the dispatchers too: a call (connect and read, 4 s each) within
    # their lease (10 s). 4 s, not 2: a page answered late on a loaded machine would be sent twice.
    settings.ALERT_NOTIFICATION_TIMEOUT_SECONDS = 4
    settings.CONSOLE_BASE_URL = "https://console.example"
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", ROUTING_KEY)


def approve(n: int, payload: dict | None = None) -> None:
    handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref=f"request {n} revision 1",
        source_id=n,
        action_key=f"onboarding:7:{n}:1",
        payload=payload or {"client_name": f"Client {n}", "plan": "standard"},
    )


def webhook(receiver: AlertReceiver, *, level: int = 0, severity: str = "page") -> None:
    AlertChannel.objects.create(
        name=f"webhook {level} {severity}",
        kind=ChannelKind.WEBHOOK,
        target=receiver.url,
        secret_env="INCIDENT_WEBHOOK_SECRET",
        severity=severity,
        level=level,
    )


def pagerduty(receiver: AlertReceiver, *, level: int) -> None:
    AlertChannel.objects.create(
        name="pagerduty",
        kind=ChannelKind.PAGERDUTY,
        target=receiver.url,
        secret_env="PAGERDUTY_ROUTING_KEY",
        level=level,
    )


def of_type(receiver: AlertReceiver, kind: str) -> list[dict]:
    return [d for d in receiver.documents() if d["type"] == f"handoff.incident.{kind}"]


# The states a page's handoff ends in: sent, withdrawn, or a person's.
SETTLED = {HandoffState.DELIVERED, HandoffState.CANCELLED, HandoffState.NEEDS_ATTENTION}


def channel_switch(channel: AlertChannel, *, enabled: bool) -> None:
    AlertChannel.objects.filter(pk=channel.pk).update(enabled=enabled)
    channel.enabled = enabled
    channel_destination_sync(channel)


def paused() -> bool:
    return DestinationHealth.objects.filter(name="receiver", state=DestinationState.PAUSED).exists()


def active() -> bool:
    return DestinationHealth.objects.filter(name="receiver", state=DestinationState.ACTIVE).exists()


def sweep_until(condition, *, what: str, procs, timeout: float = 90) -> None:
    def swept() -> bool:
        alerts_send_due()
        return condition()

    wait_until(swept, timeout=timeout, what=what, procs=procs)


@pytest.fixture
def gate(processes):
    """The receiver started, the dispatchers' RECEIVER_URL the gate's in front of it."""
    processes.start_receiver()
    gate = Gate(int(processes.receiver_url.rsplit(":", 1)[1].split("/", 1)[0]))
    processes.receiver_url = f"http://127.0.0.1:{gate.port}/delivery/api"
    yield gate
    gate.close()


def outage(processes, gate: Gate, *, handoffs: int, first: int = 1):
    """The receiver unreachable with handoffs waiting, until the breaker pauses the destination."""
    gate.down()
    for n in range(first, first + handoffs):
        approve(n)
    dispatcher = processes.start_dispatcher(f"d{first}", **OUTAGE)
    wait_until(paused, timeout=90, what="the destination to pause", procs=[dispatcher])
    return dispatcher


def test_a_blip_shorter_than_the_page_delay_pages_nobody(processes, gate, settings):
    """Fails on the old code: the first sweep after the pause paged at once."""
    settings.ALERT_NOTIFY_DELAY_SECONDS = {"page": 3600, "queue": 3600}
    with AlertReceiver() as receiver:
        webhook(receiver)
        dispatcher = outage(processes, gate, handoffs=3)
        alerts_send_due()
        [incident] = Incident.objects.filter(kind=IncidentKind.DESTINATION)
        gate.up()
        sweep_until(
            lambda: Incident.objects.filter(pk=incident.pk, state=IncidentState.RESOLVED).exists(),
            what="the incident to resolve when the destination resumes",
            procs=[dispatcher],
        )
        alerts_send_due()
        assert receiver.received == [], "nothing sent for a cause that healed within the delay"
        assert not Notification.objects.exists()


def test_an_outage_longer_than_the_delay_pages_once_escalates_once_and_resolves_once(
    processes, gate, settings
):
    """Fails on the old code: the page said neither its owner nor its deadline, nor what the pause was."""
    settings.ALERT_NOTIFY_DELAY_SECONDS = {"page": 1, "queue": 1}
    EscalationPolicy.objects.create(workspace_id=None, ack_timeout_seconds=1, max_pages=2)
    with AlertReceiver() as first, AlertReceiver() as second:
        webhook(first, level=0)
        pagerduty(second, level=1)
        dispatcher = outage(processes, gate, handoffs=3)
        sweep_until(
            lambda: len(second.received) >= 1,
            what="the page, then its escalation to the next level",
            procs=[dispatcher],
        )
        [incident] = Incident.objects.filter(kind=IncidentKind.DESTINATION)
        [page] = of_type(first, "trigger")
        assert page["subject"].startswith(f"[handoff] PAGE: incident {incident.pk}: ")
        assert "acknowledge within 1 s" in page["subject"]
        # In words, as Health says them, not the code `unreachable`.
        assert page["incident"]["failure_class"] == "unreachable (connection failures or 5xx)"
        assert page["incident"]["first_evidence"].startswith(
            "unreachable (connection failures or 5xx) since "
        )
        [escalation] = second.documents()
        assert (escalation["event_action"], escalation["dedup_key"]) == (
            "trigger",
            incident.dedup_key,
        )

        gate.up()
        sweep_until(
            lambda: len(second.received) >= 2,
            what="the resolve once the destination resumes",
            procs=[dispatcher],
        )
        for _ in range(3):
            alerts_send_due()
        assert len(of_type(first, "trigger")) == 1 and len(of_type(first, "resolve")) == 1
        assert [(d["event_action"], d["dedup_key"]) for d in second.documents()] == [
            ("trigger", incident.dedup_key),
            ("resolve", incident.dedup_key),
        ]
        incident.refresh_from_db()
        assert incident.state == IncidentState.RESOLVED
        assert incident.evidence_first.startswith("unreachable (connection failures or 5xx) since ")


def test_a_cause_that_returns_after_a_resolve_pages_again_without_unrelated_handoffs(
    processes, gate, settings
):
    """Fails on the old code: the first incident took in a handoff refused for its payload, so it stayed
    open after the resume and the second outage joined it without a page."""
    approve(100, REJECTED)
    processes.dispatch_once("d0")
    refused = Handoff.objects.get(action_key="onboarding:7:100:1")
    assert refused.state == HandoffState.NEEDS_ATTENTION
    with AlertReceiver() as receiver:
        webhook(receiver)
        dispatcher = outage(processes, gate, handoffs=2)
        sweep_until(lambda: of_type(receiver, "trigger"), what="the first page", procs=[dispatcher])
        first = Incident.objects.get(kind=IncidentKind.DESTINATION)
        assert not IncidentMember.objects.filter(incident=first, handoff_id=refused.pk).exists()
        gate.up()
        sweep_until(
            lambda: Incident.objects.filter(pk=first.pk, state=IncidentState.RESOLVED).exists(),
            what="the first incident to resolve when the destination resumes",
            procs=[dispatcher],
        )
        dispatcher.terminate()
        dispatcher.wait(timeout=30)

        outage(processes, gate, handoffs=2, first=10)
        sweep_until(
            lambda: len(of_type(receiver, "trigger")) == 2,
            what="the second outage's page",
            procs=processes.procs,
        )
        second = Incident.objects.exclude(pk=first.pk).get(kind=IncidentKind.DESTINATION)
        assert [d["id"] for d in of_type(receiver, "trigger")] == [
            f"incident-{first.pk}-1",
            f"incident-{second.pk}-1",
        ]
        assert "permanent" not in str(of_type(receiver, "trigger"))


def test_no_page_is_sent_for_a_cause_that_ended_before_it_would_go_out(processes, gate):
    """Fails on the old code: the page queued during the outage went out after the resume."""
    with AlertReceiver() as receiver:
        webhook(receiver)
        dispatcher = outage(processes, gate, handoffs=2)
        # The dispatchers deliver notifications too: the page's channel is switched off before it is
        # taken, so that it is still queued when the cause ends. The dispatcher is stopped (SIGSTOP) from
        # the page's queueing to the switch: on a loaded machine it took the page in between once.
        os.killpg(dispatcher.pid, signal.SIGSTOP)
        try:
            incidents_sync()
            [queued] = Notification.objects.with_delivery().filter(
                delivery_state=NotificationState.PENDING
            )
            channel_switch(queued.channel, enabled=False)
        finally:
            os.killpg(dispatcher.pid, signal.SIGCONT)
        gate.up()
        wait_until(active, timeout=90, what="the destination to resume", procs=[dispatcher])
        channel_switch(queued.channel, enabled=True)
        notifications_deliver_now()
        # The running dispatcher serves the channel again too, and may hold the page's claim at this moment
        # (its attempt counted, its send-time check under way: shown as retrying): whichever of the two
        # took it, its end is waited for. A page sent ends delivered, and fails the assertions below.
        wait_until(
            lambda: Handoff.objects.get(pk=queued.handoff_id).state in SETTLED,
            timeout=90,
            what="the page's handoff to settle",
            procs=[dispatcher],
        )
        assert receiver.received == []
        queued = Notification.objects.with_delivery().get(pk=queued.pk)
        assert queued.delivery_state == NotificationState.WITHDRAWN
        assert Handoff.objects.get(pk=queued.handoff_id).reason_code == "withdrawn"
        assert queued.incident.events.filter(action="page_withdrawn").exists()


def test_one_failure_tells_each_channel_once_with_a_true_headline(processes, settings, mailbox):
    """Fails on the old code: the per-handoff alert e-mail ("1 handoff(s) need attention") went besides the
    incident's, and the incident's headline said nothing of its queue, SLA or owner."""
    settings.ALERT_EMAILS = ["oncall@example.com"]
    processes.start_receiver()
    approve(1, REJECTED)
    processes.dispatch_once("d1")
    assert Handoff.objects.get().state == HandoffState.NEEDS_ATTENTION
    with AlertReceiver() as receiver:
        webhook(receiver, severity="queue")
        AlertChannel.objects.create(
            workspace_id=7,
            name="team mail",
            kind=ChannelKind.EMAIL,
            target="oncall@example.com",
            severity="queue",
        )
        for _ in range(3):
            alerts_send_due()
        [incident] = Incident.objects.all()
        [message] = mailbox.messages()
        assert message["To"] == "oncall@example.com"
        assert message["Subject"].startswith(f"[handoff] QUEUE: incident {incident.pk}: ")
        assert "SLA " in message["Subject"] and "owner " in message["Subject"]
        [document] = receiver.documents()
        assert document["id"] == f"incident-{incident.pk}-1"
