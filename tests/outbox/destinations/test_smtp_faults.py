"""A dispatcher process killed with SIGKILL while the SMTP server holds the message after DATA (it has the
whole message and has not answered yet): exactly one message in the mailbox, and the handoff with a person,
never sent again by the dispatcher that survives. Real processes on PostgreSQL: the SMTP server, the
dispatchers (`manage.py dispatch`, serving the smtp destination from its DestinationConfig row)."""

import os
import signal

import pytest

from outbox.models import (
    Attempt,
    AttemptOutcome,
    DestinationConfig,
    FailureClass,
    Handoff,
    HandoffState,
)
from tests.factories import ONBOARDING_PAYLOAD, HandoffFactory
from tests.faults.conftest import (
    START_DEADLINE_SECONDS,
    processes,  # noqa: F401 - the real processes' fixture
)
from tests.faults.test_dispatch_faults import run_out_lease, wait_until
from tests.outbox.destinations.smtp_server import SmtpServer

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
NAME = "welcome-mail"
# The victim's session would give up after SESSION_SECONDS (and record the outcome itself): it is killed
# well before that, even when a loaded machine holds the test back for many seconds between seeing the
# message and the kill (6 s were too few). A lease outlasts one call; the killed victim's is run out.
SESSION_SECONDS = 25
LEASE_SECONDS = "35"


@pytest.fixture
def server(tmp_path):
    server = SmtpServer(tmp_path / "smtp")
    yield server
    server.stop()


def test_a_dispatcher_killed_while_the_server_holds_the_message_leaves_one_message_and_a_person(
    processes,  # noqa: F811
    server,
    refused_port,
):
    DestinationConfig.objects.create(
        name=NAME,
        kind="smtp",
        config={
            "host": "127.0.0.1",
            "port": server.port,
            "security": "none",
            "from_address": "welcome@handoff.example",
            "to": "contact_email",
            "subject": "Welcome, $client_name",
            "body": "Hello $client_name\n",
            "timeout": SESSION_SECONDS,
        },
    )
    handoff = HandoffFactory(
        number=1,
        action_key="onboarding:7:1:1:send_welcome_pack",
        destination=NAME,
        payload=dict(ONBOARDING_PAYLOAD),
    )
    # The server keeps the message and holds its answer long past the session's timeout.
    server.faults(data_end="hold", hold_seconds=120)
    # The default destination (no receiver runs here) is served too and has nothing to do.
    overrides = {
        "HANDOFF_LEASE_SECONDS": LEASE_SECONDS,
        "RECEIVER_URL": f"http://127.0.0.1:{refused_port}/delivery/api",
    }
    victim = processes.start_dispatcher("victim", **overrides)
    server.wait_for_messages(1)
    assert Handoff.objects.get(pk=handoff.pk).lease_owner == "victim"
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    server.release()
    run_out_lease("victim")

    survivor = processes.start_dispatcher("survivor", **overrides)
    wait_until(
        lambda: Handoff.objects.get(pk=handoff.pk).state == S.NEEDS_ATTENTION,
        timeout=START_DEADLINE_SECONDS,
        what="the killed dispatcher's handoff to go to a person",
        procs=[survivor],
    )
    # Every automatic path once more (lease expiry, drain, settlement), then the mailbox is counted.
    processes.dispatch_once("sweeper", **overrides)
    assert survivor.poll() is None
    processes.stop_all()

    handoff = Handoff.objects.get(pk=handoff.pk)
    assert (handoff.state, handoff.failure_class, handoff.reason_code) == (
        S.NEEDS_ATTENTION,
        FailureClass.UNCERTAIN,
        "lookup_unsupported",
    )
    assert handoff.awaits_receiver_check and handoff.manual_settle_applies
    assert [(a.worker, a.outcome) for a in Attempt.objects.filter(handoff=handoff)] == [
        ("victim", AttemptOutcome.ABANDONED)
    ]
    (message,) = server.messages()
    assert message["X-Handoff-Action-Key"] == handoff.action_key
