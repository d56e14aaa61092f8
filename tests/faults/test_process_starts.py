"""How the fault tests start the product's commands: without Django's system checks (`--skip-checks`, a quarter
of a `dispatch --once`'s CPU, tests/processes.py), while a command started as a deployment starts it still runs
them and refuses what they refuse. A mail server's user without its password (outbox.E002) is a configuration
that only the checks refuse at a dispatcher's start."""

import subprocess
import sys

import pytest

from tests.processes import ROOT, manage_argv

pytestmark = [pytest.mark.postgres, pytest.mark.faults]
NO_RECEIVER = {"RECEIVER_URL": "http://127.0.0.1:9/delivery/api"}
# The mail server's user, its password not set: the system checks' outbox.E002.
MAIL_USER_WITHOUT_PASSWORD = {"EMAIL_HOST_USER": "mailer", "EMAIL_HOST_PASSWORD": ""}


def test_a_command_that_runs_the_checks_is_started_without_them_and_one_that_runs_none_as_it_is():
    assert manage_argv("dispatch", "--once")[2:] == ["dispatch", "--skip-checks", "--once"]
    assert manage_argv("reconcile")[2:] == ["reconcile", "--skip-checks"]
    # These take no --skip-checks: they would refuse it.
    assert manage_argv("shell", "-c", "pass")[2:] == ["shell", "-c", "pass"]
    assert manage_argv("check", "--deploy")[2:] == ["check", "--deploy"]


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_test_dispatcher_starts_without_the_system_checks_and_a_deployed_one_still_refuses(
    processes,
):
    env = processes.dispatcher_env(**NO_RECEIVER, **MAIL_USER_WITHOUT_PASSWORD)
    out = processes.dispatch_once("d1", **NO_RECEIVER, **MAIL_USER_WITHOUT_PASSWORD)
    assert out.startswith("claimed=0 delivered=0"), out

    deployed = subprocess.run(
        [sys.executable, "manage.py", "dispatch", "--once", "--worker", "d1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert deployed.returncode != 0
    assert "outbox.E002" in deployed.stderr, deployed.stderr[-3000:]
