"""Behind a real PgBouncer in transaction mode (the Debian package; `make pgbouncer` installs it): every
process of the product reaches PostgreSQL through it with DATABASE_TRANSACTION_POOLER=1, and delivers,
settles, reconciles and serves the console exactly as without it. The dispatchers' LISTEN connection takes
its direct route (HANDOFF_LISTEN_DATABASE_URL), as docs/scaling.md and docs/operations.md say.
"""

import contextlib
import getpass
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest
from django.db import connections
from django.test import Client

from approvals.models import Role
from delivery.models import ReceiverTask
from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffEvent, HandoffState
from tests.factories import make_user, make_workspace
from tests.faults.conftest import START_DEADLINE_SECONDS
from tests.faults.test_dispatch_faults import (
    KILL_HOLD_SECONDS,
    KILL_LEASE_SECONDS,
    KILL_READ_TIMEOUT,
    make_handoffs,
    run_out_lease,
    wait_until,
)
from tests.processes import LOCAL_HTTP, database_url

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
COUNT = 300


def _pgbouncer_binary() -> str:
    found = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if found is None and os.geteuid() == 0:
        # As `make test` does for Chromium: install the Debian package where it is missing.
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for args in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "pgbouncer"],
        ):
            subprocess.run(args, env=env, capture_output=True, timeout=600)
        found = "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    if found is None:
        pytest.fail("PgBouncer is not installed: run `make pgbouncer` (Debian package pgbouncer)")
    return found


class PgBouncer:
    """A PgBouncer of its own in transaction mode, in front of the test databases. It listens on a socket
    in its own directory only, so no other process can take its address: the port is the socket's name."""

    def __init__(self, root: Path):
        self.root, self.port, self.user = root, 6432, getpass.getuser()
        # PgBouncer refuses to run as root: it then runs as postgres and logs in to PostgreSQL as postgres
        # over the socket (peer authentication), a superuser like the test's own role.
        self.as_root = os.geteuid() == 0
        self.proc: subprocess.Popen | None = None

    def _config(self) -> str:
        login = " user=postgres" if self.as_root else ""
        lines = ["[databases]"]
        for alias in ("default", "delivery"):
            s = connections[alias].settings_dict
            host = s.get("HOST") or "/var/run/postgresql"
            port = s.get("PORT") or 5432
            lines.append(f"{s['NAME']} = host={host} port={port} dbname={s['NAME']}{login}")
        lines += [
            "[pgbouncer]",
            "listen_addr =",
            f"listen_port = {self.port}",
            f"unix_socket_dir = {self.root}",
            "auth_type = trust",
            f"auth_file = {self.root / 'userlist.txt'}",
            f"admin_users = {self.user}",
            "pool_mode = transaction",
            "max_client_conn = 200",
            "default_pool_size = 2",
            # SHOW STATS is refreshed every stats_period (60 s by default): the test reads it within seconds.
            "stats_period = 1",
        ]
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        (self.root / "userlist.txt").write_text(f'"{self.user}" ""\n')
        (self.root / "pgbouncer.ini").write_text(self._config())
        args = [_pgbouncer_binary(), str(self.root / "pgbouncer.ini")]
        if self.as_root:
            shutil.chown(self.root, "postgres")
            args[1:1] = ["-u", "postgres"]
        self.log_path = self.root / "pgbouncer.log"
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, psycopg.Error):
                self.admin("SHOW VERSION")
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError("pgbouncer did not start:\n" + self.log_path.read_text()[-3000:])

    def url(self, alias: str) -> str:
        name = connections[alias].settings_dict["NAME"]
        return f"postgres://{self.user}@:{self.port}/{name}?host={self.root}"

    def admin(self, statement: str) -> list[dict]:
        """A statement on PgBouncer's admin console (SHOW ...), rows as dicts."""
        with psycopg.connect(
            host=str(self.root),
            port=self.port,
            dbname="pgbouncer",
            user=self.user,
            autocommit=True,
            prepare_threshold=None,
            connect_timeout=5,
        ) as conn:
            cursor = conn.execute(statement)
            names = [column.name for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def pooled(processes):
    """The fault tests' processes, every one of them through a PgBouncer in transaction mode; the LISTEN
    connection on its direct route. Yields (processes, pgbouncer)."""
    # Outside pytest's temporary directory, which only root may enter: PgBouncer may run as postgres.
    root = Path(tempfile.mkdtemp(prefix="handoff-pgbouncer-"))
    bouncer = PgBouncer(root)
    bouncer.start()
    processes.base_env.update(
        DATABASE_URL=bouncer.url("default"),
        DELIVERY_DATABASE_URL=bouncer.url("delivery"),
        DATABASE_TRANSACTION_POOLER="1",
        HANDOFF_LISTEN_DATABASE_URL=database_url("default"),
    )
    try:
        yield processes, bouncer
    finally:
        processes.stop_all()
        bouncer.stop()
        shutil.rmtree(root, ignore_errors=True)


def _listen_backends() -> set[int]:
    """PostgreSQL backends of the test database that LISTEN for wake-ups."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND query = 'LISTEN handoff_due' AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in cursor.fetchall()}


def _pooler_backends(bouncer: PgBouncer) -> set[int]:
    return {row["remote_pid"] for row in bouncer.admin("SHOW SERVERS")}


def test_behind_pgbouncer_in_transaction_mode_everything_works_as_without_it(pooled):
    procs, bouncer = pooled
    keys = make_handoffs(COUNT)
    lost = keys[:2]
    procs.start_receiver(faults={"keys": {key: "drop_after_commit" for key in lost}})
    dispatchers = [procs.start_dispatcher(name) for name in ("d1", "d2")]

    wait_until(
        lambda: Handoff.objects.filter(state=S.DELIVERED).count() == COUNT,
        timeout=120,
        what="every handoff delivered through the pooler",
        procs=[*dispatchers, procs.receiver],
    )

    # Exactly one task per key, and the source holds each task's id.
    per_key = Counter(ReceiverTask.objects.values_list("action_key", flat=True))
    assert len(per_key) == COUNT and set(per_key.values()) == {1}
    tasks = dict(ReceiverTask.objects.values_list("action_key", "task_id"))
    assert {h.action_key: h.destination_id for h in Handoff.objects.all()} == {
        key: str(task_id) for key, task_id in tasks.items()
    }
    # The answers lost after the receiver committed were settled by lookup, not sent again.
    for key in lost:
        handoff = Handoff.objects.get(action_key=key)
        assert Attempt.objects.filter(handoff=handoff).count() == 1
        assert HandoffEvent.objects.filter(
            handoff=handoff, from_state=S.UNCERTAIN, to_state=S.DELIVERED
        ).exists()

    report = procs.manage("reconcile", "--strict", "--no-progress")
    assert "clean: source and receiver agree; no findings" in report

    # The console, through the pooler: an operator's list page, and /readyz.
    operator = make_user("olga", workspace=make_workspace(7), roles=(Role.OPERATOR,))
    client = Client()
    client.force_login(operator)
    base = procs.receiver_url.removesuffix("/delivery/api")
    page = httpx.get(
        f"{base}/handoffs/", cookies={"sessionid": client.cookies["sessionid"].value}, timeout=30
    )
    assert page.status_code == 200
    assert "onboarding:7:" in page.text
    assert LOCAL_HTTP.get(f"{base}/readyz", timeout=30).text == "ready\n"

    # It all went through the pooler in transaction mode; LISTEN did not.
    source = connections["default"].settings_dict["NAME"]
    [pool] = [p for p in bouncer.admin("SHOW POOLS") if p["database"] == source]
    assert pool["pool_mode"] == "transaction"

    def pooled_transactions() -> int:
        return {row["database"]: row for row in bouncer.admin("SHOW STATS")}[source][
            "total_xact_count"
        ]

    wait_until(
        lambda: pooled_transactions() > COUNT,
        timeout=120,
        what="PgBouncer's statistics to count the run's transactions",
    )
    listening = _listen_backends()
    assert len(listening) >= len(dispatchers), "each dispatcher LISTENs on its direct route"
    assert not listening & _pooler_backends(bouncer)
    for proc in dispatchers:
        assert proc.poll() is None
        assert "cannot LISTEN" not in proc.log_path.read_text()


def test_behind_pgbouncer_a_dispatcher_killed_mid_call_is_settled_by_another_without_a_duplicate(
    pooled,
):
    procs, _bouncer = pooled
    [key] = make_handoffs(1)
    procs.start_receiver(faults={"keys": {key: "slow"}, "slow_seconds": KILL_HOLD_SECONDS})
    lease = str(KILL_LEASE_SECONDS)
    victim = procs.start_dispatcher(
        "victim", HANDOFF_LEASE_SECONDS=lease, RECEIVER_READ_TIMEOUT=str(KILL_READ_TIMEOUT)
    )
    wait_until(
        lambda: (
            ReceiverTask.objects.filter(action_key=key).exists()
            and Attempt.objects.filter(outcome=AttemptOutcome.IN_PROGRESS).exists()
        ),
        timeout=START_DEADLINE_SECONDS,
        what="the victim's call to reach the receiver",
        procs=[victim],
    )
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    run_out_lease("victim")
    rescuer = procs.start_dispatcher("rescuer", HANDOFF_LEASE_SECONDS=lease)
    wait_until(
        lambda: Handoff.objects.filter(action_key=key, state=S.DELIVERED).exists(),
        timeout=START_DEADLINE_SECONDS,
        what="the rescuer to settle the victim's handoff",
        procs=[rescuer],
    )
    handoff = Handoff.objects.get(action_key=key)
    assert ReceiverTask.objects.count() == 1
    assert handoff.destination_id == str(ReceiverTask.objects.get().task_id)
    attempt = Attempt.objects.get(handoff=handoff)
    assert (attempt.worker, attempt.outcome, attempt.reason_code) == (
        "victim",
        AttemptOutcome.ABANDONED,
        "lease_expired",
    )
