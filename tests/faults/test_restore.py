"""The source database restored from a backup, with real processes on a private PostgreSQL server: a real
pg_dump, deliveries after it, a real pg_restore that makes the source forget them, and the runbook's
step before the dispatchers start again (docs/operations.md, "Restore from a backup").

The receiver keeps exactly one task per key, the source learns every forgotten task id back by lookup and
sends no create call, reconciliation finds nothing, and each handoff's page says what was recovered and how.
"""

import subprocess

import httpx
import pytest

from tests.faults.test_dispatch_faults import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.faults]
COUNT, BEFORE_BACKUP = 40, 20

OPERATOR_SESSION = """
from django.test import Client
from approvals.models import Role, Workspace
from tests.factories import make_user, make_workspace
workspace = Workspace.objects.filter(pk=7).first() or make_workspace(7)
user = make_user("operator-{suffix}", workspace=workspace, roles=(Role.OPERATOR,))
client = Client()
client.force_login(user)
print("SESSION", client.cookies["sessionid"].value)
"""


def operator_session(procs, suffix: str) -> str:
    """A signed-in operator of workspace 7 (where the faults' handoffs live), made by a process of the
    deployment's own settings: its session cookie, for requests to the web process."""
    out = procs.manage("shell", "-c", OPERATOR_SESSION.format(suffix=suffix))
    return out.split("SESSION ", 1)[1].split()[0]


def console_page(procs, session: str, path: str) -> httpx.Response:
    """GET a console page from the web process (the gunicorn that also serves the receiver's API)."""
    base = procs.receiver_url.removesuffix("/delivery/api")
    return httpx.get(base + path, cookies={"sessionid": session}, timeout=30)


def _source(server, statement: str, params=None) -> list[tuple]:
    return server.sql(statement, dbname="handoff", params=params)


def _states(server) -> dict[str, int]:
    return dict(_source(server, "SELECT state, count(*) FROM outbox_handoff GROUP BY state"))


def _client_binary(server, name: str) -> str:
    """pg_dump, pg_restore and vacuumdb of the private server's own version."""
    return str(server.bindir / name)


def _backup(server, path) -> str:
    """pg_dump of the source database, custom format; returns when it was taken (the database clock)."""
    taken_at = _source(server, "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')")
    subprocess.run(
        [_client_binary(server, "pg_dump"), "-Fc", "-f", str(path), *_conn(server), "handoff"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return taken_at[0][0] + " UTC"


def _restore(server, path) -> None:
    """pg_restore of the backup over the source database (its tables dropped and made again), then
    `vacuumdb --analyze-only`, as the runbook says (a dump carries no planner statistics)."""
    subprocess.run(
        [
            _client_binary(server, "pg_restore"),
            "--clean",
            "--if-exists",
            "--single-transaction",
            "--no-owner",
            "-d",
            "handoff",
            *_conn(server),
            str(path),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    subprocess.run(
        [_client_binary(server, "vacuumdb"), "--analyze-only", "-d", "handoff", *_conn(server)],
        check=True,
        capture_output=True,
        timeout=120,
    )


def _conn(server) -> list[str]:
    return ["-h", str(server.sockets), "-p", str(server.port), "-U", server.user]


def _create_calls(observed) -> int:
    if not observed.exists():
        return 0
    return sum(1 for line in observed.read_text().splitlines() if line.startswith("POST "))


def _receiver_tasks(server) -> dict[str, str]:
    rows = server.sql(
        "SELECT action_key, task_id::text FROM delivery_receivertask", dbname="handoff_delivery"
    )
    return dict(rows)


def test_a_restored_source_learns_back_what_it_forgot_without_sending_again(
    private_postgres, private_processes, tmp_path
):
    procs, server = private_processes, private_postgres
    procs.manage(
        "shell",
        "-c",
        f"from tests.faults.test_dispatch_faults import make_handoffs; make_handoffs({COUNT})",
    )
    later = [BEFORE_BACKUP]  # the handoffs delivered after the backup: source_id > %s
    _source(
        server,
        "UPDATE outbox_handoff SET next_attempt_at = now() + interval '1 day' WHERE source_id > %s",
        later,
    )
    observed = tmp_path / "receiver-calls.log"
    procs.start_receiver(faults={"observe": str(observed)})
    procs.dispatch_once("before-backup")
    assert _states(server) == {"delivered": BEFORE_BACKUP, "pending": COUNT - BEFORE_BACKUP}

    # The backup holds the later handoffs pending and due; they are delivered after it.
    _source(server, "UPDATE outbox_handoff SET next_attempt_at = now() WHERE source_id > %s", later)
    taken_at = _backup(server, tmp_path / "source.dump")
    procs.dispatch_once("after-backup")
    assert _states(server) == {"delivered": COUNT}
    tasks = _receiver_tasks(server)
    assert len(tasks) == COUNT
    creates_before_restore = _create_calls(observed)

    _restore(server, tmp_path / "source.dump")
    assert _states(server) == {"delivered": BEFORE_BACKUP, "pending": COUNT - BEFORE_BACKUP}, (
        "the restored source forgot the deliveries after the backup"
    )

    out = procs.manage("handoffs_after_restore", "--backup-taken-at", taken_at)
    assert f"{COUNT - BEFORE_BACKUP} pending handoff(s) marked uncertain" in out
    dispatcher = procs.start_dispatcher("after-restore")
    wait_until(
        lambda: _states(server) == {"delivered": COUNT},
        timeout=60,
        what="every forgotten handoff settled",
        procs=[dispatcher],
    )

    assert _receiver_tasks(server) == tasks, "exactly one task per key, none added"
    assert _create_calls(observed) == creates_before_restore, "no create call after the restore"
    learnt = dict(_source(server, "SELECT action_key, destination_id FROM outbox_handoff"))
    assert learnt == tasks, "every handoff holds the receiver's task id"
    assert _source(
        server,
        "SELECT count(*) FROM outbox_attempt a JOIN outbox_handoff h ON h.id = a.handoff_id"
        " WHERE h.source_id > %s",
        later,
    ) == [(0,)], "the forgotten handoffs were learnt back, not attempted"

    report = procs.manage("reconcile", "--strict", "--no-progress")
    assert "clean: source and receiver agree; no findings" in report

    pk, key = _source(
        server,
        "SELECT id, action_key FROM outbox_handoff WHERE source_id > %s ORDER BY id LIMIT 1",
        later,
    )[0]
    history = _source(
        server,
        "SELECT from_state, to_state, actor_label, reason FROM outbox_handoffevent"
        " WHERE handoff_id = %s ORDER BY id",
        [pk],
    )
    assert [(f, t) for f, t, _a, _r in history[-2:]] == [
        ("pending", "uncertain"),
        ("uncertain", "delivered"),
    ]
    assert history[-2][2] == "restore from backup"
    assert f"restored from a backup taken at {taken_at}" in history[-2][3]
    assert f"has task {tasks[key]} for this key with the same payload" in history[-1][3]

    page = console_page(procs, operator_session(procs, "restore"), f"/handoffs/{pk}/")
    assert page.status_code == 200
    assert f"restored from a backup taken at {taken_at}" in page.text
    assert f"has task {tasks[key]} for this key" in page.text
