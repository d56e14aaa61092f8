"""Real processes for fault tests: the receiver under gunicorn, dispatchers as `manage.py dispatch`.

They share the test databases on PostgreSQL, so every test here is transactional (its writes commit)
and the processes are stopped before the databases are flushed.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.db import connections

ROOT = Path(__file__).resolve().parents[2]


def _url(alias: str) -> str:
    s = connections[alias].settings_dict
    host = s.get("HOST") or "/var/run/postgresql"
    auth = f"{s['USER']}@" if s.get("USER") else ""
    port = f":{s['PORT']}" if s.get("PORT") else ""
    if host.startswith("/"):
        return f"postgres://{auth}{port}/{s['NAME']}?host={host}"
    return f"postgres://{auth}{host}{port}/{s['NAME']}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    def __init__(self, tmp_path: Path):
        self.procs: list[subprocess.Popen] = []
        self.tmp_path = tmp_path
        self.base_env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.test_settings",
            "DATABASE_URL": _url("default"),
            "DELIVERY_DATABASE_URL": _url("delivery"),
            "HANDOFF_DESTINATION": "http",
            "HANDOFF_WAKE_ON_COMMIT": "0",
            "PYTHONUNBUFFERED": "1",
        }
        self.receiver_url = ""

    def _spawn(self, args: list[str], env: dict, log_name: str) -> subprocess.Popen:
        log = open(self.tmp_path / log_name, "wb")  # noqa: SIM115 - closed with the process
        # Its own process group: a qcluster's children go with it when the test kills the group.
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        proc.log_path = self.tmp_path / log_name
        self.procs.append(proc)
        return proc

    def start_receiver(self, *, faults: dict | None = None, threads: int = 16) -> str:
        port = _free_port()
        env = {**self.base_env, "RECEIVER_FAULTS": json.dumps(faults) if faults else ""}
        self._spawn(
            [str(Path(sys.executable).with_name("gunicorn")), "config.wsgi", "--bind", f"127.0.0.1:{port}",
             "--workers", "1", "--worker-class", "gthread", "--threads", str(threads), "--timeout", "120"],
            env, "receiver.log",
        )
        self.receiver_url = f"http://127.0.0.1:{port}/delivery/api"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                # Unsigned: a 401 proves the app is up and answering.
                if httpx.get(f"{self.receiver_url}/tasks", timeout=1).status_code == 401:
                    return self.receiver_url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("receiver did not start:\n" + (self.tmp_path / "receiver.log").read_text()[-3000:])

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
        }
        env.update(overrides)
        return env

    def start_dispatcher(self, name: str, **overrides: str) -> subprocess.Popen:
        args = [sys.executable, "manage.py", "dispatch", "--worker", name, "--maintain-every", "0.5",
                "--idle-sleep", "0.1"]
        return self._spawn(args, self.dispatcher_env(**overrides), f"dispatcher-{name}.log")

    def start_qcluster(self, **overrides: str) -> subprocess.Popen:
        env = {**self.dispatcher_env(**overrides), "Q_WORKERS": "1"}
        return self._spawn([sys.executable, "manage.py", "qcluster"], env, "qcluster.log")

    def manage(self, *args: str, **overrides: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.dispatcher_env(**overrides),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def dispatch_once(self, name: str, **overrides: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", "dispatch", "--once", "--worker", name],
            cwd=ROOT, env=self.dispatcher_env(**overrides), capture_output=True, text=True, timeout=120,
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


@pytest.fixture
def processes(transactional_db, tmp_path):
    if connections["default"].vendor != "postgresql":
        pytest.fail("fault tests need PostgreSQL: run them with DATABASE_URL and DELIVERY_DATABASE_URL set")
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()
    # Let go of the test connections' view of what the subprocesses wrote before the flush.
    for alias in ("default", "delivery"):
        connections[alias].close()
