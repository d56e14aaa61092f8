"""`manage.py dispatch --once`, a real process, on a destination held by an operator: it sends nothing, says on
stderr what held the destination (`manage.py destinations holds`' words) and that nothing could be sent, and
exits 0, as docs/operations.md says ("Stop and start"); once the hold ends the same command delivers and says
nothing of holds."""

import subprocess

import pytest

from delivery.models import ReceiverTask
from outbox.models import HandoffState
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_resume_by_operator,
)
from tests.faults.conftest import Processes
from tests.faults.test_django_q import approve_request_42
from tests.processes import ROOT, manage_argv

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


@pytest.fixture
def processes(transactional_db, tmp_path):
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()


def dispatch_once(processes: Processes) -> subprocess.CompletedProcess:
    return subprocess.run(
        manage_argv("dispatch", "--once", "--worker", "once"),
        cwd=ROOT,
        env=processes.dispatcher_env(HANDOFF_DESTINATION="in_process"),
        capture_output=True,
        text=True,
        # A loaded machine (load 10 and more) takes long to import Django.
        timeout=300,
    )


def test_dispatch_once_says_what_held_each_destination_and_exits_0(processes):
    handoff = approve_request_42()
    name = handoff.destination
    destination_pause_by_operator(
        name=name, actor=None, actor_label="olga", reason="accounts migration"
    )

    held = dispatch_once(processes)
    assert held.returncode == 0, held.stdout + held.stderr
    assert "claimed=0 delivered=0" in held.stdout
    [line] = [each for each in held.stderr.splitlines() if each.startswith(f"held {name}: ")]
    assert "accounts migration" in line and "set by olga" in line, line
    assert "nothing sent: every enabled destination is held" in held.stderr
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.PENDING
    assert not ReceiverTask.objects.filter(action_key=handoff.action_key).exists()

    destination_resume_by_operator(name=name, actor=None, actor_label="olga", reason="done")
    sent = dispatch_once(processes)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "delivered=1" in sent.stdout
    said = sent.stderr.splitlines()
    assert not [each for each in said if each.startswith(("held ", "nothing sent"))], sent.stderr
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.DELIVERED
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1
