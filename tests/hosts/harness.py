"""The product on hosts of its own (tests/hosts/network.py): PostgreSQL on host `db`, the bundled receiver on
host `receiver` (gunicorn on its loopback, behind the delaying relay on the host's address: the one way in),
and each dispatcher (`manage.py dispatch`) on a host of its own, with its own clock (libfaketime) when asked.

The test process stays outside the namespaces and reads the databases through the server's Unix socket; the
hosts reach PostgreSQL over TCP only, so a partition from the database cuts them off. Their connection
strings bound how long a write may hang on a dead link (`tcp_user_timeout`), as docs/operations.md advises.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

from tests.hosts.network import Network
from tests.hosts.pooler import Pooler
from tests.hosts.postgres_cluster import PostgresServer
from tests.processes import ROOT, manage_argv, migrated_template_dump

DB_PORT = 5432
RECEIVER_PORT = 8000
RECEIVER_INNER_PORT = 8001
START_DEADLINE = 120.0
# A write on a link that went dead fails after this long; a partition healed sooner lets it through.
TCP_USER_TIMEOUT_MS = 60000
TEMPLATES = {"default": "hosts_template", "delivery": "hosts_template_delivery"}


def faketime_library() -> str:
    libraries = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    if not libraries:
        raise RuntimeError(
            "libfaketime is not installed: `make faketime` (Debian package faketime)"
        )
    return str(libraries[0])


class HostsCluster:
    """The network and the database server, made once for a session; `Run`s use fresh databases on it."""

    def __init__(self, root: Path):
        self.root = root
        self.network = Network()
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        # Appended in this order: a host's address is its place in the list.
        for name in ("db", "receiver", "d1", "d2", "d3", "ledger", "mail", "web", "desk", "pooler"):
            self.network.add_host(name)
        db = self.network["db"]
        self.server = PostgresServer(
            self.root / "db", port=DB_PORT, listen_addresses=db.address, command_prefix=db.command()
        )
        self.server.initdb()
        self.server.start()
        self.runs = 0
        for name in TEMPLATES.values():
            self.server.sql(f'CREATE DATABASE "{name}"')
        if all(map(migrated_template_dump, TEMPLATES)):
            for alias, name in TEMPLATES.items():
                self.server.load(migrated_template_dump(alias), name)
            return
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.test_settings",
            "DATABASE_URL": self.server.url(TEMPLATES["default"]),
            "DELIVERY_DATABASE_URL": self.server.url(TEMPLATES["delivery"]),
        }
        for database in ("default", "delivery"):
            done = subprocess.run(
                manage_argv("migrate", "--no-input", "--database", database),
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            if done.returncode:
                raise RuntimeError(f"migrate {database} failed:\n{done.stdout}\n{done.stderr}")

    def close(self) -> None:
        if hasattr(self, "server"):
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                self.server.stop("immediate")
        self.network.remove()


class Run:
    """One test's databases (copies of the migrated templates) and processes on the hosts."""

    def __init__(self, cluster: HostsCluster, tmp_path: Path):
        cluster.runs += 1
        self.cluster, self.network, self.server = cluster, cluster.network, cluster.server
        self.tmp_path = tmp_path
        self.names = {alias: f"hosts_run_{cluster.runs}_{alias}" for alias in TEMPLATES}
        for alias, name in self.names.items():
            self.server.sql(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATES[alias]}"')
        self.procs: dict[str, subprocess.Popen] = {}
        self.pooled: set[str] = set()  # hosts whose processes reach PostgreSQL through the pooler
        self.pooler: Pooler | None = None
        self.killed: list[subprocess.Popen] = []
        self.clock_files: dict[str, Path] = {}
        self.extra_env: dict[str, str] = {}  # for every process (a destination's token)
        self.receiver_url = (
            f"http://{self.network['receiver'].address}:{RECEIVER_PORT}/delivery/api"
        )

    # Where things are.

    def tcp_url(self, alias: str, *, pooled: bool = False) -> str:
        db = self.network["db"]
        options = (
            "connect_timeout=3&keepalives=1&keepalives_idle=5&keepalives_interval=2"
            f"&keepalives_count=3&tcp_user_timeout={TCP_USER_TIMEOUT_MS}"
        )
        if pooled:
            return self.pooler.url(self.names[alias], options)
        return f"postgres://{self.server.user}@{db.address}:{DB_PORT}/{self.names[alias]}?{options}"

    def start_pooler(self, *hosts: str) -> None:
        """PgBouncer on the pooler host (tests/hosts/pooler.py); `hosts`' dispatchers go through it."""
        self.pooler = Pooler(
            # Under the cluster's root, which the postgres user (as whom it runs) may enter.
            self.network, self.cluster.root / f"pooler-{self.names['default']}", user=self.server.user,
            target=(self.network["db"].address, DB_PORT),
        )  # fmt: skip
        self.pooler.start()
        self.pooled.update(hosts)

    def socket_url(self, alias: str) -> str:
        return self.server.url(self.names[alias])

    def connect(self, alias: str = "default"):
        return self.server.connect(self.names[alias])

    def base_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.test_settings",
            "DATABASE_URL": self.tcp_url("default"),
            "DELIVERY_DATABASE_URL": self.tcp_url("delivery"),
            "HANDOFF_DESTINATION": "http",
            "HANDOFF_WAKE_ON_COMMIT": "0",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_ALLOWED_HOSTS": f"127.0.0.1,localhost,{self.network['receiver'].address}",
            **self.extra_env,
        }

    # Processes.

    def spawn(self, name: str, host: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        log_path = self.tmp_path / f"{name}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                self.network[host].command(*args),
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        proc.log_path = log_path
        self.procs[name] = proc
        return proc

    def start_receiver(self, faults: str = "") -> None:
        control = self.tmp_path / "receiver-delay"
        control.write_text("0\n")
        self.network.relays["receiver"] = control
        env = {**self.base_env(), "RECEIVER_FAULTS": faults}
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        self.spawn(
            "receiver", "receiver",
            [gunicorn, "config.wsgi", "--bind", f"127.0.0.1:{RECEIVER_INNER_PORT}", "--workers", "1",
             "--worker-class", "gthread", "--threads", "16", "--timeout", "120"],
            env,
        )  # fmt: skip
        address = self.network["receiver"].address
        self.spawn(
            "relay", "receiver",
            [sys.executable, "-m", "tests.hosts.relay", f"{address}:{RECEIVER_PORT}",
             f"127.0.0.1:{RECEIVER_INNER_PORT}", str(control)],
            env,
        )  # fmt: skip
        self._wait_receiver_up()

    def _wait_receiver_up(self) -> None:
        # Asked from a dispatcher host: the way the dispatchers will reach it.
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            if receiver_reachable_from(self, "d1", timeout=5):
                return
            time.sleep(0.5)
        raise RuntimeError("receiver did not start:\n" + self.log("receiver")[-3000:])

    def dispatcher_env(self, host: str, **overrides: str) -> dict[str, str]:
        env = {
            **self.base_env(),
            "RECEIVER_URL": self.receiver_url,
            "RECEIVER_READ_TIMEOUT": "5",
            "RECEIVER_CONNECT_TIMEOUT": "2",
            "HANDOFF_LEASE_SECONDS": "8",
            "HANDOFF_BACKOFF_BASE": "0.05",
            "HANDOFF_BACKOFF_CAP": "0.5",
            "HANDOFF_MAX_ATTEMPTS": "50",
            "HANDOFF_BREAKER_PROBE_BASE": "0.2",
            "HANDOFF_BREAKER_PROBE_CAP": "2",
        }
        if host in self.pooled:
            env.update(
                DATABASE_URL=self.tcp_url("default", pooled=True),
                DELIVERY_DATABASE_URL=self.tcp_url("delivery", pooled=True),
                DATABASE_TRANSACTION_POOLER="1",
            )
        if host in self.clock_files:
            env.update(
                LD_PRELOAD=faketime_library(),
                FAKETIME_TIMESTAMP_FILE=str(self.clock_files[host]),
                FAKETIME_CACHE_DURATION="1",
            )
        env.update(overrides)
        return env

    def start_dispatcher(
        self, host: str, worker: str | None = None, **overrides: str
    ) -> subprocess.Popen:
        """`manage.py dispatch` on `host`, as `worker` (the host's name unless given: a dispatcher started
        again after a kill takes a new name, as a new process would)."""
        worker = worker or host
        args = manage_argv(
            "dispatch", "--worker", worker, "--maintain-every", "0.5", "--idle-sleep", "0.1"
        )
        return self.spawn(worker, host, args, self.dispatcher_env(host, **overrides))

    def kill(self, name: str) -> None:
        """SIGKILL the process `name` (a crash the test chose: not counted by `exited`)."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        self.killed.append(proc)

    def own_clock(self, host: str, offset_seconds: int = 0) -> None:
        """Give `host` a clock of its own (before its processes start); `set_clock` moves it later."""
        self.clock_files[host] = self.tmp_path / f"clock-{host}"
        self.set_clock(host, offset_seconds)

    def set_clock(self, host: str, offset_seconds: int) -> None:
        """The host's wall clock jumps to `offset_seconds` from the true time (read within a second)."""
        path = self.clock_files[host]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"{offset_seconds:+d}s\n")
        tmp.replace(path)

    def manage(self, *args: str) -> str:
        """`manage.py args` from outside the namespaces, on this run's databases (their socket)."""
        env = {
            **self.base_env(),
            "DATABASE_URL": self.socket_url("default"),
            "DELIVERY_DATABASE_URL": self.socket_url("delivery"),
            "RECEIVER_URL": self.receiver_url,
        }
        done = subprocess.run(
            manage_argv(*args), cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def log(self, name: str) -> str:
        return self.procs[name].log_path.read_text(errors="replace")

    def exited(self) -> dict[str, int]:
        """The processes that exited by themselves (a crash), with their return codes."""
        return {name: p.returncode for name, p in self.procs.items() if p.poll() is not None}

    def signal(self, name: str, signum: int) -> None:
        if name in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.procs[name].pid, signum)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def close(self) -> None:
        self.stop_all()
        if self.pooler is not None:
            self.pooler.stop()
        self.network.heal()
        self.network.relays.clear()
        for name in self.names.values():
            with contextlib.suppress(Exception):
                self.server.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def alive_url(receiver_url: str) -> str:
    """The receiver's liveness probe, next to its API."""
    return receiver_url.replace("/delivery/api", "/healthz")


def http_call_command(
    method: str, url: str, body: dict | None = None, *, timeout: float = 5
) -> list[str]:
    """A command that makes one HTTP call and prints the status, then the JSON answered ({} for another
    type), for a host's namespace (`Network.command`); it fails when no answer comes. The standard library
    alone (`-I -S`): 49 ms of CPU a call where importing httpx made it 229 ms, and the waits for a server's
    start ask every 0.5 s (docs/testing.md)."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    payload = None if body is None else json.dumps(body)
    code = (
        "import http.client, json\n"
        f"c = http.client.HTTPConnection({parts.hostname!r}, {parts.port or 80}, timeout={timeout})\n"
        f"body = {payload!r}\n"
        f"c.request({method!r}, {path!r}, body=body, "
        "headers={'content-type': 'application/json'} if body is not None else {})\n"
        "a = c.getresponse()\n"
        "data = a.read()\n"
        "print(a.status)\n"
        "print(json.dumps(json.loads(data) if 'json' in (a.getheader('content-type') or '') else {}))\n"
    )
    return [sys.executable, "-I", "-S", "-c", code]


def receiver_reachable_from(run: Run, host: str, *, timeout: float = 2) -> bool:
    """Whether `host` gets an answer from the receiver now (a probe, not a measurement). Its liveness probe:
    an unsigned call to the signed API would be a refused signature, a security event, and ten of them page."""
    probe = http_call_command("GET", alive_url(run.receiver_url), timeout=timeout)
    done = subprocess.run(
        run.network[host].command(*probe), capture_output=True, text=True, timeout=60
    )
    return done.stdout.split()[:1] == ["200"]
