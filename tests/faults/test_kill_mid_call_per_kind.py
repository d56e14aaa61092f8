"""A dispatcher killed with SIGKILL mid-call on each kind, while the server holds an answer it has already
committed. On each HTTP kind: exactly one effect per key at the server, and the handoff delivered with the
server's id, found by asking (a lookup), never by a second create. On the smtp kind (no idempotency, no
lookup): only the call in flight goes to a person, the calls before it are delivered, the claims it never
sent go again, and the server holds each message once. Real processes on PostgreSQL: the servers, the
dispatchers (`manage.py dispatch`, serving the destination from its DestinationConfig row written by
`destination_configs_apply`)."""

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from delivery.models import ReceiverTask
from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffState
from outbox.services.destination_configs import destination_configs_apply
from tests.factories import HandoffFactory
from tests.faults.conftest import START_DEADLINE_SECONDS, Processes
from tests.faults.test_dispatch_faults import run_out_lease, wait_until
from tests.outbox.destinations.idempotency_key_server import LedgerProcess
from tests.outbox.destinations.smtp_server import SmtpServer
from tests.outbox.destinations.test_idempotency_key_http import ledger_config

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
# The victim would give up after READ_TIMEOUT and record the outcome itself: it is killed well before, even
# when a loaded machine holds the test back for many seconds between seeing the call and the kill (6 s were
# too few), and the server holds its answer for longer than that. A lease outlasts one call (connect +
# read; the row is also checked against this process's lease, 30 s); the killed victim's lease is run out on
# the database clock rather than waited for.
CONNECT_TIMEOUT = 1
READ_TIMEOUT = 25
HOLD_SECONDS = READ_TIMEOUT + 2
LEASE_SECONDS = "35"
LEDGER_TOKEN = "ledger-token-kill"


def destination_apply(entry: dict) -> None:
    """The destination as a row, the way `manage.py destinations apply` writes it."""
    destination_configs_apply(document={"destinations": [entry]}, actor_label="fault test")


def kill_mid_call(victim: subprocess.Popen, handoff: Handoff) -> None:
    """SIGKILL the victim while its call is out: the handoff is in flight under its lease, the attempt open."""
    held = Handoff.objects.get(pk=handoff.pk)
    assert (held.state, held.lease_owner) == (S.IN_FLIGHT, "victim")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    assert victim.returncode == -signal.SIGKILL
    [attempt] = Attempt.objects.filter(handoff=handoff)
    assert attempt.outcome == AttemptOutcome.IN_PROGRESS, "killed before it could record anything"
    run_out_lease("victim")


def settled_by_survivor(processes: Processes, handoff: Handoff, **overrides: str) -> Handoff:
    """A second dispatcher takes over (lease expiry, settlement), then one sweep more runs every automatic path
    again."""
    survivor = processes.start_dispatcher("survivor", **overrides)
    wait_until(
        lambda: Handoff.objects.get(pk=handoff.pk).state == S.DELIVERED,
        timeout=START_DEADLINE_SECONDS,
        what="the killed dispatcher's handoff to be settled",
        procs=[survivor],
    )
    processes.dispatch_once("sweeper", **overrides)
    assert survivor.poll() is None
    return Handoff.objects.get(pk=handoff.pk)


def assert_delivered_by_lookup_after_the_abandoned_attempt(
    handoff: Handoff, receipt_id: str
) -> None:
    assert handoff.state == S.DELIVERED
    assert handoff.destination_id == receipt_id
    assert handoff.receipt["found_by"] == "lookup"
    attempts = Attempt.objects.filter(handoff=handoff).order_by("number")
    assert [(a.worker, a.outcome, a.reason_code) for a in attempts] == [
        ("victim", AttemptOutcome.ABANDONED, "lease_expired")
    ], "the abandoned call is the only attempt: settled by asking, not by sending again"
    assert list(handoff.events.order_by("id").values_list("to_state", flat=True)) == [
        S.IN_FLIGHT,
        S.UNCERTAIN,
        S.DELIVERED,
    ]


def create_calls(observed: Path) -> int:
    return sum(1 for line in observed.read_text().splitlines() if line.startswith("POST "))


def test_http_kind_killed_while_the_receiver_holds_its_committed_answer_leaves_one_task(
    processes, tmp_path
):
    name = "crm"
    handoff = HandoffFactory(number=1, destination=name)
    observed = tmp_path / "receiver-calls.log"
    observed.touch()
    # The receiver commits the task, then holds the answer past the victim's read timeout.
    url = processes.start_receiver(
        faults={
            "keys": {handoff.action_key: "slow"},
            "slow_seconds": HOLD_SECONDS,
            "observe": str(observed),
        }
    )
    destination_apply(
        {
            "name": name,
            "kind": "http",
            "url": url,
            "connect_timeout": CONNECT_TIMEOUT,
            "read_timeout": READ_TIMEOUT,
        }
    )
    overrides = {"HANDOFF_LEASE_SECONDS": LEASE_SECONDS}
    victim = processes.start_dispatcher("victim", **overrides)
    wait_until(
        lambda: (
            ReceiverTask.objects.filter(action_key=handoff.action_key).exists()
            and Attempt.objects.filter(handoff=handoff, outcome=AttemptOutcome.IN_PROGRESS).exists()
        ),
        timeout=START_DEADLINE_SECONDS,
        what="the receiver to commit the task and hold its answer",
        procs=[victim],
    )
    kill_mid_call(victim, handoff)

    handoff = settled_by_survivor(processes, handoff, **overrides)
    # The receiver writes a create call's line once it has answered it: the held one's comes last.
    wait_until(
        lambda: create_calls(observed) >= 1,
        timeout=HOLD_SECONDS + START_DEADLINE_SECONDS,
        what="the held answer to end",
    )
    processes.stop_all()
    assert create_calls(observed) == 1, "one create call reached the receiver: the victim's"
    [task] = ReceiverTask.objects.all()
    assert task.action_key == handoff.action_key, "one task for the key, none for anything else"
    assert_delivered_by_lookup_after_the_abandoned_attempt(handoff, str(task.task_id))


@pytest.fixture
def ledger(monkeypatch):
    # Applying the row checks that its token is there; the dispatchers get it in their environment.
    monkeypatch.setenv("HANDOFF_DEST_LEDGER_CLIENT_TOKEN", LEDGER_TOKEN)
    server = LedgerProcess(token=LEDGER_TOKEN)
    try:
        server.wait_until_up()
        yield server
    finally:
        server.stop()


def test_idempotency_key_http_kind_killed_while_the_ledger_holds_its_committed_answer_leaves_one_entry(
    processes,
    ledger,
    refused_port,
):
    config = ledger_config(ledger.url, connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT)
    destination_apply(config)
    handoff = HandoffFactory(number=1, destination=config["name"])
    ledger.faults(hold_answer_for=[handoff.action_key])
    overrides = {
        "HANDOFF_LEASE_SECONDS": LEASE_SECONDS,
        "HANDOFF_DEST_LEDGER_CLIENT_TOKEN": LEDGER_TOKEN,
        # The default destination (no receiver runs here) is served too and has nothing to do.
        "RECEIVER_URL": f"http://127.0.0.1:{refused_port}/delivery/api",
    }
    victim = processes.start_dispatcher("victim", **overrides)
    wait_until(
        lambda: ledger.state()["held"] == [handoff.action_key],
        timeout=START_DEADLINE_SECONDS,
        what="the ledger to commit the entry and hold its answer",
        procs=[victim],
    )
    assert len(ledger.entries()) == 1
    kill_mid_call(victim, handoff)
    # The held answer goes to a dead connection.
    ledger.faults(release=True)

    handoff = settled_by_survivor(processes, handoff, **overrides)
    processes.stop_all()
    [entry] = ledger.entries()
    assert entry["request_key"] == handoff.action_key
    assert [c["key"] for c in ledger.creates()] == [handoff.action_key], (
        "one create call reached the ledger: the victim's"
    )
    assert_delivered_by_lookup_after_the_abandoned_attempt(handoff, entry["ref"])


MAIL = "welcome-mail"


def mail_config(port: int) -> dict:
    return {
        "name": MAIL,
        "kind": "smtp",
        "host": "127.0.0.1",
        "port": port,
        "security": "none",
        "from_address": "welcome@handoff.example",
        "to": "contact_email",
        "subject": "Welcome, $client_name",
        "body": "Hello $client_name,\n\nyour $plan plan is ready.\n",
        "timeout": READ_TIMEOUT,
        "retry": {"base_delay": 0, "max_delay": 0},
    }


@pytest.fixture
def mailbox(tmp_path):
    server = SmtpServer(tmp_path / "smtp")
    yield server
    server.stop()


def attempts_by(handoff: Handoff) -> list[tuple[str, str]]:
    attempts = Attempt.objects.filter(handoff=handoff).order_by("number")
    return [(a.worker, a.outcome) for a in attempts]


def test_smtp_kind_killed_while_the_server_holds_a_batchs_third_message_leaves_that_one_to_a_person(
    processes,
    mailbox,
    refused_port,
):
    """Six e-mails claimed in one batch; the worker is killed while the server holds the third one's DATA.
    The two sent before it were recorded before the next call started (delivered), the third alone goes to a
    person ("during the call"), the three never sent go again and are delivered once, never worded as lost
    during a call. Each Message-ID reaches the server once. Before, all six went to a person."""
    destination_apply(mail_config(mailbox.port))
    handoffs = [HandoffFactory(number=n, destination=MAIL) for n in range(1, 7)]
    held = 3
    mailbox.faults(data_end="hold", hold_message=held, hold_seconds=60)
    overrides = {
        "HANDOFF_LEASE_SECONDS": LEASE_SECONDS,
        "HANDOFF_CLAIM_BATCH": "20",
        # The default destination (no receiver runs here) is served too and has nothing to do.
        "RECEIVER_URL": f"http://127.0.0.1:{refused_port}/delivery/api",
    }
    victim = processes.start_dispatcher("victim", **overrides)
    wait_until(
        lambda: len(mailbox.messages()) == held,
        timeout=START_DEADLINE_SECONDS,
        what="the server to store the third message and hold its answer",
        procs=[victim],
    )
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    mailbox.release()  # its answer goes to a dead connection
    run_out_lease("victim")
    in_flight = mailbox.messages()[held - 1]["X-Handoff-Action-Key"]
    assert in_flight == handoffs[held - 1].action_key, "sent in the order claimed"
    sent_before = handoffs[: held - 1]
    assert [Handoff.objects.get(pk=h.pk).state for h in sent_before] == [S.DELIVERED] * (
        held - 1
    ), "each call's outcome was recorded before the next call started"

    survivor = processes.start_dispatcher("survivor", **overrides)
    open_states = (S.PENDING, S.IN_FLIGHT, S.UNCERTAIN)
    wait_until(
        lambda: not Handoff.objects.filter(destination=MAIL, state__in=open_states).exists(),
        timeout=START_DEADLINE_SECONDS,
        what="every e-mail to be delivered or handed to a person",
        procs=[survivor],
    )
    processes.dispatch_once("sweeper", **overrides)
    processes.stop_all()

    ids = Counter(mailbox.message_ids())
    assert len(ids) == len(handoffs) and set(ids.values()) == {1}, ids
    person = Handoff.objects.get(state=S.NEEDS_ATTENTION)
    assert person.action_key == in_flight
    assert person.reason_code == "lookup_unsupported"
    assert "during the call" in person.last_error
    assert attempts_by(person) == [("victim", AttemptOutcome.ABANDONED)]
    for handoff in sent_before:
        assert attempts_by(handoff) == [("victim", AttemptOutcome.CREATED)]
    for handoff in handoffs[held:]:
        handoff.refresh_from_db()
        assert handoff.state == S.DELIVERED
        *before, last = attempts_by(handoff)
        assert last == ("survivor", AttemptOutcome.CREATED)
        assert {outcome for _worker, outcome in before} <= {AttemptOutcome.SKIPPED}
        assert not handoff.events.filter(reason__contains="during the call").exists()
    never_sent = Handoff.objects.filter(events__reason__contains="never sent").distinct()
    assert set(never_sent) == set(handoffs[held:]), "the victim had claimed them all"
