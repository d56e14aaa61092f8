"""PgBouncer in transaction mode on a host of its own (`pooler`, tests/hosts/harness.py), in front of the
database host: the processes that go through it name the pooler's address in their connection strings and
set DATABASE_TRANSACTION_POOLER=1, as docs/operations.md ("Behind a pooler") says. Without a host
(`network=None`) it runs on this machine and listens on its Unix socket only (tests/faults/
test_failover_pooler.py), its target a server's socket directory.

Its `[databases]` entry is a wildcard pointing at one server (`point_at`): repointing it at another (a
promoted replica) and asking PgBouncer to RELOAD is the failover an operator makes behind a pooler.
`restart()` kills it (SIGKILL: every client and server connection cut) and starts it again on the same
address. Its admin console answers on a Unix socket in its own directory (the test process is outside the
namespaces; a Unix socket is not behind one).
"""

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg

from tests.faults.test_pgbouncer import _pgbouncer_binary

POOLER_PORT = 6432
START_DEADLINE = 120.0


class Pooler:
    def __init__(self, network, root: Path, *, user: str, target: tuple[str, int]):
        self.network, self.root, self.user = network, Path(root).resolve(), user
        self.host = network["pooler"] if network is not None else None
        self.target = target
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.root.mkdir(parents=True, exist_ok=True)

    def url(self, dbname: str, options: str = "") -> str:
        if self.host is None:
            return f"postgres://{self.user}@:{POOLER_PORT}/{dbname}?host={self.root}&{options}"
        return f"postgres://{self.user}@{self.host.address}:{POOLER_PORT}/{dbname}?{options}"

    def _config(self) -> str:
        host, port = self.target
        return "\n".join(
            [
                "[databases]",
                f"* = host={host} port={port}",
                "[pgbouncer]",
                f"listen_addr = {self.host.address if self.host else ''}",
                f"listen_port = {POOLER_PORT}",
                f"unix_socket_dir = {self.root}",
                "auth_type = trust",
                f"auth_file = {self.root / 'userlist.txt'}",
                f"admin_users = {self.user}",
                "pool_mode = transaction",
                "max_client_conn = 400",
                "default_pool_size = 10",
                # A server gone (a failover) is found at once, not after the default 15 s.
                "server_connect_timeout = 3",
                "server_login_retry = 1",
                "",
            ]
        )

    def _write_config(self) -> None:
        (self.root / "userlist.txt").write_text(f'"{self.user}" ""\n')
        (self.root / "pgbouncer.ini").write_text(self._config())
        if os.geteuid() == 0:
            for path in (self.root, *self.root.iterdir()):
                shutil.chown(path, "postgres")

    def start(self) -> None:
        self._write_config()
        args = [_pgbouncer_binary(), str(self.root / "pgbouncer.ini")]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root.
            args[1:1] = ["-u", "postgres"]
        log = open(self.root / "pgbouncer.log", "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            self.host.command(*args) if self.host else args,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, psycopg.Error):
                self.admin("SHOW VERSION")
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(
            "pgbouncer did not start:\n" + (self.root / "pgbouncer.log").read_text()[-3000:]
        )

    def admin(self, statement: str) -> list[tuple]:
        with psycopg.connect(
            host=str(self.root), port=POOLER_PORT, dbname="pgbouncer", user=self.user,
            autocommit=True, prepare_threshold=None, connect_timeout=5,
        ) as conn:  # fmt: skip
            cursor = conn.execute(statement)
            return list(cursor.fetchall()) if cursor.description else []

    def point_at(self, target: tuple[str, int]) -> None:
        """Repoint the pooler (its [databases] entry, then RELOAD): new server connections go there."""
        self.target = target
        self._write_config()
        self.admin("RELOAD")
        # Server connections to the old server are closed once idle; none is kept for the next transaction.
        self.admin("RECONNECT")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)
        self.proc = None

    def restart(self) -> None:
        """A crash and a start again: every connection through it cut, its address back within seconds."""
        self.restarts += 1
        self.stop()
        self.start()
