"""Real processes for fault tests: the receiver under gunicorn, dispatchers as `manage.py dispatch`.

They share the test databases on PostgreSQL, so every test here is transactional (its writes commit)
and the processes are stopped before the databases are flushed.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from django.db import connections

from tests.hosts.postgres_cluster import PostgresServer
from tests.processes import (
    LOCAL_HTTP,
    ROOT,
    KernelPort,
    database_url,
    loaded_deadline,
    manage_argv,
    migrated_template_dump,
)

# How long a process may take to answer after its start: a loaded machine (load 10 and more) needs more
# than 30 s for a gunicorn to import Django and answer.
START_DEADLINE_SECONDS = 120


class Processes:
    def __init__(self, tmp_path: Path):
        self.procs: list[subprocess.Popen] = []
        self.tmp_path = tmp_path
        self.base_env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.test_settings",
            "DATABASE_URL": database_url("default"),
            "DELIVERY_DATABASE_URL": database_url("delivery"),
            "HANDOFF_DESTINATION": "http",
            "HANDOFF_WAKE_ON_COMMIT": "0",
            "PYTHONUNBUFFERED": "1",
        }
        self.receiver_url = ""
        # The receivers' ports, held from the first start to the end of the test (an outage keeps its port).
        self.ports: dict[int, KernelPort] = {}

    def port(self) -> KernelPort:
        """A port of the kernel's, held until the test ends."""
        held = KernelPort()
        self.ports[held.port] = held
        return held

    def _spawn(
        self, args: list[str], env: dict, log_name: str, listen: KernelPort | None = None
    ) -> subprocess.Popen:
        """Start `args`; with `listen`, "{fd}" in them names the inherited listening socket of that port."""
        log = open(self.tmp_path / log_name, "wb")  # noqa: SIM115 - closed with the process
        sock = listen.listener() if listen else None
        fds = (sock.fileno(),) if sock else ()
        # Its own process group: a qcluster's children go with it when the test kills the group.
        try:
            proc = subprocess.Popen(
                [arg.replace("{fd}", str(fds[0])) if fds else arg for arg in args],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=fds,
            )
        finally:
            if sock:
                sock.close()
        proc.log_path = self.tmp_path / log_name
        self.procs.append(proc)
        return proc

    def start_receiver(
        self, *, faults: dict | None = None, threads: int = 16, port: int | None = None
    ) -> str:
        """The receiver under gunicorn; `port`: an earlier receiver's of this test, to come back on it."""
        held = self.ports[port] if port else self.port()
        env = {**self.base_env, "RECEIVER_FAULTS": json.dumps(faults) if faults else ""}
        self.receiver = self._spawn(
            [
                str(Path(sys.executable).with_name("gunicorn")),
                "config.wsgi",
                "--bind",
                "fd://{fd}",
                "--workers",
                "1",
                "--worker-class",
                "gthread",
                "--threads",
                str(threads),
                "--timeout",
                "120",
            ],
            env,
            "receiver.log",
            listen=held,
        )
        self.receiver_url = f"http://127.0.0.1:{held.port}/delivery/api"
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        while time.monotonic() < deadline:
            if self.receiver.poll() is not None:
                break
            try:
                # Its liveness probe, not an unsigned call to the signed API: each of those is a refused signature, a
                # security event (a poll that timed out on a loaded machine too), and ten page.
                alive = self.receiver_url.replace("/delivery/api", "/healthz")
                if LOCAL_HTTP.get(alive, timeout=5).status_code == 200:
                    return self.receiver_url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(
            "receiver did not start:\n" + (self.tmp_path / "receiver.log").read_text()[-3000:]
        )

    def stop_receiver(self) -> int:
        """Stop the receiver process (an outage); returns its port so that it can come back on it. The port
        stays held meanwhile: connections to it are refused, and no other process can take it."""
        port = int(self.receiver_url.rsplit(":", 1)[1].split("/", 1)[0])
        self.receiver.send_signal(signal.SIGTERM)
        self.receiver.wait(timeout=30)
        self.procs.remove(self.receiver)
        return port

    def dispatcher_env(self, **overrides: str) -> dict:
        env = {
            **self.base_env,
            "RECEIVER_URL": self.receiver_url,
            "RECEIVER_READ_TIMEOUT": "1.5",
            "RECEIVER_CONNECT_TIMEOUT": "1",
            "HANDOFF_LEASE_SECONDS": "10",
            "HANDOFF_BACKOFF_BASE": "0.05",
            "HANDOFF_BACKOFF_CAP": "0.5",
            "HANDOFF_MAX_ATTEMPTS": "8",
            # A paused destination is probed soon, so that tests see it resume within seconds.
            "HANDOFF_BREAKER_PROBE_BASE": "0.2",
            "HANDOFF_BREAKER_PROBE_CAP": "2",
        }
        env.update(overrides)
        return env

    def start_dispatcher(self, name: str, **overrides: str) -> subprocess.Popen:
        args = manage_argv(
            "dispatch", "--worker", name, "--maintain-every", "0.5", "--idle-sleep", "0.1"
        )
        return self._spawn(args, self.dispatcher_env(**overrides), f"dispatcher-{name}.log")

    def start_qcluster(self, **overrides: str) -> subprocess.Popen:
        env = {**self.dispatcher_env(**overrides), "Q_WORKERS": "1"}
        return self._spawn(manage_argv("qcluster"), env, "qcluster.log")

    def manage(self, *args: str, **overrides: str) -> str:
        done = subprocess.run(
            manage_argv(*args),
            cwd=ROOT,
            env=self.dispatcher_env(**overrides),
            capture_output=True,
            text=True,
            # A whole `migrate` of both databases took over 120 s at a load of 13.
            timeout=loaded_deadline(300),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def migrate_default(self, server: PostgresServer, **overrides: str) -> None:
        """The default database `handoff` on `server` at the latest migration: `make test`'s migrated template
        loaded as SQL where the run has one (docs/testing.md), else `manage.py migrate` (`overrides`: its
        environment, DATABASE_URL naming that database on `server`)."""
        dump = migrated_template_dump("default")
        if dump:
            server.load(dump, "handoff")
        else:
            self.manage("migrate", "--no-input", **overrides)

    def dispatch_once(self, name: str, **overrides: str) -> str:
        done = subprocess.run(
            manage_argv("dispatch", "--once", "--worker", name),
            cwd=ROOT,
            env=self.dispatcher_env(**overrides),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()
        for held in self.ports.values():
            held.close()
        self.ports.clear()


@pytest.fixture
def processes(transactional_db, tmp_path):
    if connections["default"].vendor != "postgresql":
        pytest.fail(
            "fault tests need PostgreSQL: run them with DATABASE_URL and DELIVERY_DATABASE_URL set"
        )
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()
    # Let go of the test connections' view of what the subprocesses wrote before the flush.
    for alias in ("default", "delivery"):
        connections[alias].close()


class PrivateServer(PostgresServer):
    """A throwaway PostgreSQL server with its own data directory and socket directory (tests/hosts/
    postgres_cluster.py), so that a test may restart it without touching the cluster that other test runs
    share; started with the two databases, stopped as a crash."""

    def __init__(self, root: Path):
        super().__init__(root=root, port=55432)

    def start(self) -> None:
        self.initdb()
        super().start()
        for name in ("handoff", "handoff_delivery"):
            self.sql(f'CREATE DATABASE "{name}"')

    def start_from(self, data: Path) -> None:
        """Start on a copy of a stopped server's data directory (`cp -a`: the postgres user's files)."""
        self._own_dirs()
        subprocess.run(["cp", "-a", str(data), str(self.data)], check=True, timeout=300)
        super().start()

    def restart(self) -> None:
        self._pg_ctl("-m", "fast", "restart")

    def resume(self) -> None:
        """Start the stopped server again, its data kept."""
        super().start()

    def stop(self) -> None:
        super().stop("immediate")


@pytest.fixture(scope="session")
def _private_templates():
    """Stopped servers' data directories, each made once a run and copied for every test that asks: `fresh`
    (the two databases, empty) and `migrated` (both migrated). initdb and the migrations of both databases
    took a minute a test while the suites ran side by side."""
    root = Path(tempfile.mkdtemp(prefix="handoff-faults-pg-templates-"))
    made: dict[str, Path] = {}

    def template(kind: str) -> Path:
        if kind not in made:
            server = PrivateServer(root / kind)
            server.start()
            if kind == "migrated" and all(map(migrated_template_dump, ("default", "delivery"))):
                # `make test`'s template, migrated once for every stream (docs/testing.md).
                server.load(migrated_template_dump("default"), "handoff")
                server.load(migrated_template_dump("delivery"), "handoff_delivery")
            elif kind == "migrated":
                env = {
                    **os.environ,
                    "DJANGO_SETTINGS_MODULE": "config.test_settings",
                    "DATABASE_URL": server.url("handoff"),
                    "DELIVERY_DATABASE_URL": server.url("handoff_delivery"),
                }
                for database in ("default", "delivery"):
                    done = subprocess.run(
                        manage_argv("migrate", "--no-input", "--database", database),
                        cwd=ROOT,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=600,
                    )
                    assert done.returncode == 0, done.stdout + done.stderr
            server._pg_ctl("-m", "fast", "stop")
            made[kind] = server.data
        return made[kind]

    yield template
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def private_postgres(request, _private_templates):
    """A private server of the test's own, on a copy of a template: migrated when the test also asks for
    `private_processes`, else with its two databases empty."""
    root = Path(tempfile.mkdtemp(prefix="handoff-faults-pg-"))
    server = PrivateServer(root)
    kind = "migrated" if "private_processes" in request.fixturenames else "fresh"
    try:
        server.start_from(_private_templates(kind))
        yield server
    finally:
        with contextlib.suppress(AssertionError, RuntimeError, subprocess.SubprocessError):
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def private_processes(private_postgres, tmp_path):
    """Processes against the private server, its two databases migrated (a copy of the migrated template)."""
    procs = Processes(tmp_path)
    procs.base_env.update(
        DATABASE_URL=private_postgres.url("handoff"),
        DELIVERY_DATABASE_URL=private_postgres.url("handoff_delivery"),
    )
    yield procs
    procs.stop_all()
