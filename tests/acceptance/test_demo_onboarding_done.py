"""The demo as `make run` loads it (`manage.py demo --destinations demo/destinations.json`): bob's request 42,
approved by alice, goes through its three steps to the bundled receiver (its work pushed by signed status
events), the bundled accounts service (its work pulled from GET /v1/accounts/<id>) and e-mail (done when
delivered). Bob reads "done" only once every step's work is done. Every service is real: the receiver and the
accounts service answer from the live server, the SMTP server runs in a process of its own; the dispatcher's
sweep and the work pull are driven as their schedules run them, back to back, so how soon bob reads it here is
this machine's speed, not the schedules' (each minute): the deadlines are a loaded machine's, and nothing
asserts a duration (a minute from the last step is what a machine at a load of 10 can overrun while every
pass does its part)."""

import base64
import time
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from approvals.models import Request
from approvals.services import request_approve
from console.selectors import requests_of
from console.step_status import YES
from delivery.services import task_status_set
from delivery.status_events import sender_idle
from outbox.dispatch.dispatcher import sweep
from outbox.models import Handoff, HandoffState
from outbox.services.work_pull import handoffs_pull_work_status
from tests.outbox.destinations.smtp_server import SmtpServer
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
INSTANCE = "onboarding:7:42:1"
EVENTS_SECRET = "whsec_" + base64.b64encode(b"the-demo-receivers-events-secret").decode()
ACCOUNTS_TOKEN = "demo-accounts-token"
# How long the passes may take to reach each outcome, on a machine at a load of 10.
DEADLINE_SECONDS = 300.0


@pytest.fixture
def demo(live_server, settings, monkeypatch, tmp_path):
    """The demo loaded over the live server (receiver, accounts service, status events) and an SMTP server."""
    mailbox = SmtpServer(tmp_path / "smtp")
    monkeypatch.setenv("PORT", live_server.url.rsplit(":", 1)[1])
    settings.DEMO_SMTP_PORT = mailbox.port
    settings.ACCOUNTS_API_TOKEN = ACCOUNTS_TOKEN
    monkeypatch.setenv("HANDOFF_DEST_ACCOUNTS_TOKEN", ACCOUNTS_TOKEN)
    # An account is "pending" this long after it is made, then "active": the pull reads both.
    settings.ACCOUNTS_ACTIVATION_SECONDS = 3
    settings.RECEIVER_EVENTS_SIGNING_SECRET = EVENTS_SECRET
    monkeypatch.setenv("HANDOFF_DEST_RECEIVER_EVENTS_SECRET", EVENTS_SECRET)
    settings.RECEIVER_STATUS_EVENTS_URL = (
        f"{live_server.url}/reconciliation/api/destinations/receiver/status-events"
    )
    try:
        call_command(
            "demo",
            destinations=str(ROOT / "demo" / "destinations.json"),
            password="demo-password",
            stdout=StringIO(),
        )
        yield mailbox
    finally:
        mailbox.stop()


def steps() -> dict[str, Handoff]:
    return {h.step: h for h in Handoff.objects.filter(instance_key=INSTANCE).order_by("step_index")}


def bobs_request():
    mine = requests_of(get_user_model().objects.get(username="bob"))
    [request] = [r for r in mine if (r.workspace_id, r.number) == (7, 42)]
    return request.status


def scheduled_passes(until, *, deadline: float, what: str) -> None:
    """The dispatcher's sweep and the work pull, as their schedules run them, until `until()` holds."""
    while not until():
        assert time.monotonic() < deadline, f"not in time: {what}"
        sweep()
        handoffs_pull_work_status()
        time.sleep(0.2)


def test_the_demos_three_step_onboarding_reads_done_for_bob_once_every_steps_work_is_done(demo):
    request = Request.objects.get(workspace_id=7, number=42, revision=1)
    request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=get_user_model().objects.get(username="alice"),
        payload_hash=request.payload_hash,
    )

    def all_delivered() -> bool:
        found = steps()
        return len(found) == 3 and all(h.state == HandoffState.DELIVERED for h in found.values())

    scheduled_passes(
        all_delivered, deadline=time.monotonic() + DEADLINE_SECONDS, what="three steps delivered"
    )
    found = steps()
    assert [(name, h.destination) for name, h in found.items()] == [
        ("create_client", "receiver"),
        ("provision_account", "accounts"),
        ("send_welcome_pack", "welcome-mail"),
    ]
    assert found["send_welcome_pack"].work_status == "done"  # the e-mail sent is the work
    assert len(demo.messages()) == 1

    # The account becomes active by itself; the pull reads it. The receiver's work is still open.
    scheduled_passes(
        lambda: steps()["provision_account"].work_status == "done",
        deadline=time.monotonic() + DEADLINE_SECONDS,
        what="the account read active",
    )
    status = bobs_request()
    assert status.headline.tone != YES
    assert "in progress at step 1 of 3" in status.headline.text
    assert [line.tone for line in status.steps][1:] == [YES, YES]

    # The people at the receiver finish the client's task; the receiver pushes its signed status event.
    task_status_set(action_key=found["create_client"].action_key, status="done")
    assert sender_idle(timeout=DEADLINE_SECONDS)
    scheduled_passes(
        lambda: bobs_request().headline.tone == YES,
        deadline=time.monotonic() + DEADLINE_SECONDS,
        what="bob reads done",
    )
    status = bobs_request()
    assert status.headline.text.endswith("done: the work of every step is done")
    assert [line.tone for line in status.steps] == [YES, YES, YES]
