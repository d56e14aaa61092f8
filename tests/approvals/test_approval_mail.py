"""The approval deadlines' e-mails ride the outbox (issue 39): a reminder recorded while the mail server is
down is not lost; once the server is up the dispatcher delivers it, exactly one message per reminder, to a
real SMTP server in a process of its own (aiosmtpd), however often the engine runs after."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group

from approvals.models import ApprovalNotice, Request
from approvals.rules import rules_for
from approvals.services.approval_deadlines import approval_deadlines_sweep
from approvals.services.approval_notices import NOTICE_WORKFLOW
from approvals.services.workflow_files import workflows_apply
from outbox.clock import db_now, db_time
from outbox.destinations import destination_named
from outbox.dispatch.dispatcher import dispatch_batch, sweep
from outbox.models import Handoff, HandoffState
from tests.outbox.destinations.smtp_server import SmtpServer
from tests.processes import KernelPort

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
POLICY = {
    "due_after_hours": 24,
    "remind_before_hours": 8,
    "expire_after_hours": 72,
    "escalate_to": "leads",
}


@pytest.fixture
def down_mail_server(settings, tmp_path):
    """EMAIL_HOST and EMAIL_PORT name a port nobody listens on yet (held, connections refused)."""
    port = KernelPort()
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port.port
    servers: list[SmtpServer] = []
    yield lambda: servers.append(SmtpServer(tmp_path / "smtp", port=port)) or servers[-1]
    for server in servers:
        server.stop()
    port.close()


@pytest.fixture
def due_for_a_reminder(world):
    """Request 42 of workspace 7 has waited 17 hours of its 24: its approvers are due a reminder; alice is
    the one with an e-mail address."""
    world["alice"].email = "alice@example.test"
    world["alice"].save()
    world["leads"] = Group.objects.create(name="leads")
    entry = {"name": "onboarding", "schema": rules_for("onboarding").schema, "approval": POLICY}
    workflows_apply(document={"workflows": [entry]}, actor=None)
    Request.objects.filter(pk=world["request"].pk).update(
        created_at=db_time() - timedelta(hours=17)
    )
    return world


def _engine_runs(times: int) -> None:
    """The dispatchers' work on the e-mail destination: claims, then sweeps (leases, settlement)."""
    mail = destination_named(Handoff.objects.get(workflow=NOTICE_WORKFLOW).destination)
    for _ in range(times):
        dispatch_batch(destination=mail)
        sweep(destination=mail)


def test_a_reminder_made_while_the_mail_server_is_down_arrives_exactly_once_when_it_is_up(
    due_for_a_reminder, down_mail_server
):
    # alice and rita approve in workspace 7: two reminders, one e-mail (rita has no address).
    assert approval_deadlines_sweep().reminded == 2
    (handoff,) = Handoff.objects.filter(workflow=NOTICE_WORKFLOW)
    assert handoff.payload["to"] == "alice@example.test"
    assert ApprovalNotice.objects.count() == 2

    _engine_runs(1)  # the server is down: the call is refused, the reminder waits to be retried
    waiting = Handoff.objects.get(pk=handoff.pk)
    assert (waiting.state, waiting.reason_code) == (S.PENDING, "connect_failed")
    assert approval_deadlines_sweep().reminded == 0  # a later sweep records no second reminder

    server = down_mail_server()
    # Its backoff over (the database's clock moved on, as it would): due again.
    Handoff.objects.filter(pk=handoff.pk).update(next_attempt_at=db_now())
    _engine_runs(3)

    (message,) = server.wait_for_messages(1)
    assert message["To"] == "alice@example.test"
    assert message["Subject"].startswith("Approval due")
    assert "/approvals/link/" in message.get_payload(decode=True).decode()
    assert Handoff.objects.get(pk=handoff.pk).state == S.DELIVERED
    _engine_runs(2)
    assert len(server.messages()) == 1
