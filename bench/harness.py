"""What every benchmark needs: its own PostgreSQL databases, the receiver under gunicorn, dispatcher
processes, SQL helpers. Benchmarks never touch the development or test databases."""

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
PGHOST = os.environ.get("PGHOST", "/var/run/postgresql")
PYTHON = sys.executable
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
# Every database the benchmarks create starts with this prefix, so that a bench run never touches the
# development or test databases, nor another bench run's on the same cluster (BENCH_DB_PREFIX=handoff_bench).
DB_PREFIX = os.environ.get("BENCH_DB_PREFIX", "bench")


def db_name(suffix: str) -> str:
    return f"{DB_PREFIX}_{suffix}"


def dsn(name: str) -> str:
    return f"dbname={name} host={PGHOST}"


def url(name: str) -> str:
    return f"postgres:///{name}?host={PGHOST}"


def recreate_database(name: str) -> None:
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


class Bench:
    """One pair of benchmark databases with the schema migrated, and the processes started on them."""

    def __init__(self, prefix: str = "e2e", log_dir: Path | None = None, **env: str):
        self.source, self.delivery = db_name(f"{prefix}_source"), db_name(f"{prefix}_delivery")
        self.log_dir = log_dir or ROOT / "var" / "bench"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
            "DJANGO_DEBUG": "0",
            "DJANGO_SECURE": "0",
            "DATABASE_URL": url(self.source),
            "DELIVERY_DATABASE_URL": url(self.delivery),
            "RECEIVER_SIGNING_SECRET": SECRET,
            "HANDOFF_DESTINATION": "http",
            "HANDOFF_WAKE_ON_COMMIT": "0",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.receiver_url = ""
        self.receiver_port = 0
        self.receiver: subprocess.Popen | None = None

    def setup(self) -> "Bench":
        for name in (self.source, self.delivery):
            recreate_database(name)
        for args in (["migrate", "-v0"], ["migrate", "--database", "delivery", "-v0"]):
            subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, check=True)
        return self

    def spawn(self, args: list[str], log_name: str, **env: str) -> subprocess.Popen:
        log = open(self.log_dir / log_name, "wb")  # noqa: SIM115 - lives as long as the process
        proc = subprocess.Popen(args, cwd=ROOT, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start_receiver(self, workers: int = 2, threads: int = 8, port: int = 0) -> str:
        """The receiver under gunicorn on `port` (a free one when 0); waits until it answers."""
        if not port:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
        self.receiver_port = port
        self.receiver = self.spawn([str(Path(PYTHON).with_name("gunicorn")), "config.wsgi", "--bind",
                                    f"127.0.0.1:{port}", "--workers", str(workers), "--worker-class", "gthread",
                                    "--threads", str(threads)], f"receiver-{port}.log")
        self.receiver_url = f"http://127.0.0.1:{port}/delivery/api"
        self.env["RECEIVER_URL"] = self.receiver_url
        for _ in range(150):
            try:
                if httpx.get(f"{self.receiver_url}/tasks", timeout=1).status_code == 401:
                    return self.receiver_url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"receiver did not start; see {self.log_dir / f'receiver-{port}.log'}")

    def start_dispatchers(self, count: int, tag: str, **env: str) -> list[subprocess.Popen]:
        return [
            self.spawn([PYTHON, "manage.py", "dispatch", "--worker", f"{tag}-{n}", "--idle-sleep", "0.5",
                        "--maintain-every", "5"], f"dispatcher-{tag}-{n}.log", **env)
            for n in range(count)
        ]

    def stop(self, procs: list[subprocess.Popen] | None = None) -> None:
        targets = self.procs if procs is None else procs
        for proc in targets:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in targets:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = [p for p in self.procs if p not in targets]

    @contextmanager
    def sql(self, which: str = "source"):
        with psycopg.connect(dsn(self.source if which == "source" else self.delivery), autocommit=True) as conn:
            yield conn

    def scalar(self, query: str, which: str = "source", params=None):
        with self.sql(which) as conn:
            return conn.execute(query, params).fetchone()[0]


def insert_handoffs_sql(first: int, count: int, *, state: str = "pending", workspace: int = 7) -> str:
    """One INSERT … SELECT generate_series: `count` handoffs with distinct keys, due now."""
    delivered = state == "delivered"
    # Only integers and fixed words are formatted in; this builds benchmark data, never user input.
    return f"""
        INSERT INTO outbox_handoff (action_key, workflow, workspace_id, source_ref, source_id, rule_version,
            payload, payload_hash, destination, state, attempts, attempts_in_run, next_attempt_at, lease_owner,
            fencing_epoch, destination_id, failure_class, reason_code, last_error, created_at, updated_at,
            delivered_at,
            instance_key, step, step_index, kind, plan, compensation_state, compensation_operation, work_status,
            receipt)
        SELECT 'onboarding:{workspace}:' || n || ':1', 'onboarding', {workspace}, 'request ' || n, n,
            'onboarding-v1', p.canonical::jsonb, encode(sha256(convert_to(p.canonical, 'UTF8')), 'hex'), 'receiver',
            '{state}', {1 if delivered else 0}, {1 if delivered else 0}, clock_timestamp(), '', 0,
            {"gen_random_uuid()::text" if delivered else "''"}, '', '', '', clock_timestamp(), clock_timestamp(),
            {"clock_timestamp()" if delivered else "NULL"},
            '', '', 0, 'action', '[]'::jsonb, '', '', '', '{{}}'::jsonb
        FROM generate_series({first}, {first + count - 1}) AS n,
             -- The payload's canonical JSON (sorted keys, compact), so the hash is the one the receiver computes.
             LATERAL (SELECT '{{"client_name":"Client ' || n || '","plan":"standard"}}' AS canonical) p
    """


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
