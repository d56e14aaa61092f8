"""What every benchmark needs: its own PostgreSQL databases, the receiver under gunicorn, dispatcher
processes, SQL helpers. Benchmarks never touch the development or test databases."""

import atexit
import base64
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
# The ports of the bench's servers: the kernel's choice, held (tests/processes.py says why).
sys.path.insert(0, str(ROOT))
from bench.schema_template import copy_migrated  # noqa: E402
from tests.processes import KernelPort  # noqa: E402

PGHOST = os.environ.get("PGHOST", "/var/run/postgresql")
PYTHON = sys.executable
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
# Every database the benchmarks create starts with this prefix, so that a bench run never touches the
# development or test databases, nor another bench run's on the same cluster (BENCH_DB_PREFIX=handoff_bench).
DB_PREFIX = os.environ.get("BENCH_DB_PREFIX", "bench")
# Each index build's sort memory in `bulk_fill_split` (one build a core at once; the machine has 24 GiB).
BUILD_MEMORY = os.environ.get("BENCH_BUILD_MEMORY", "1GB")


# gunicorn's recommended worker count for the receiver (docs: "(2 x $num_cores) + 1").
RECEIVER_WORKERS = 2 * (os.cpu_count() or 1) + 1
RECEIVER_THREADS = 4


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


# Every Bench that started a process (its `stop()` may have stopped them all since). When the bench's Python
# process ends, whatever ends it (its last line, an exception, Ctrl-C's KeyboardInterrupt, or SIGTERM:
# `_exit_on_sigterm`), `stop_left_running` stops what is left, as a `finally` around the whole script would:
# a section that failed halfway (bench/e2e.py's `main` stops its Bench only on its last line) no longer leaves
# its receiver and dispatchers running, holding the cores and the databases for the sections after it.
_STARTED: list["Bench"] = []
_OWNER_PID = os.getpid()


def stop_left_running() -> None:
    """`Bench.stop()` for every Bench that started a process, the last first (at exit; only in the process
    that started them, never in a fork). A Bench already stopped has nothing left to stop."""
    if os.getpid() != _OWNER_PID:
        return
    while _STARTED:
        _STARTED.pop().stop()


atexit.register(stop_left_running)


def _exit_on_sigterm() -> None:
    """SIGTERM ends the bench as SystemExit (so `finally` blocks and `stop_left_running` run), unless the
    script handles SIGTERM itself; Python's default would end it without either."""
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


class Bench:
    """One pair of benchmark databases with the schema migrated, and the processes started on them: stopped by
    `stop()`, and at the latest when the bench's process ends (`stop_left_running`)."""

    def __init__(
        self,
        prefix: str = "e2e",
        log_dir: Path | None = None,
        *,
        source: str | None = None,
        delivery: str | None = None,
        **env: str,
    ):
        """Databases `<BENCH_DB_PREFIX>_<prefix>_source` and `_delivery`, unless named by `source`/`delivery`."""
        self.source = source or db_name(f"{prefix}_source")
        self.delivery = delivery or db_name(f"{prefix}_delivery")
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
        # Held from a server's first start to the end (a receiver stopped for an outage keeps its port).
        self.ports: dict[int, KernelPort] = {}

    def port(self) -> int:
        """A port of the kernel's, held until `stop()`: refused while nothing listens, never another's."""
        held = KernelPort()
        self.ports[held.port] = held
        return held.port

    def setup(self) -> "Bench":
        """Both databases afresh, migrated: copies of the run's migrated templates (`bench/schema_template.py`)."""
        templates = {
            db_name("template_source"): self.source,
            db_name("template_delivery"): self.delivery,
        }
        copy_migrated(dsn("postgres"), templates, self._migrate)
        return self

    def with_own_source(self, prefix: str) -> "Bench":
        """A Bench on a source database of its own, `<BENCH_DB_PREFIX>_<prefix>_source` (a copy of the migrated
        template, which this one's `setup` made current), sharing this one's delivery database and receiver:
        a second outbox, filled once, delivering to the same receiver."""
        other = Bench(prefix, self.log_dir, delivery=self.delivery)
        other.env = {**self.env, "DATABASE_URL": url(other.source)}
        self.share_receiver(other)
        copy_migrated(dsn("postgres"), {db_name("template_source"): other.source}, _not_migrated)
        return other

    def share_receiver(self, other: "Bench") -> "Bench":
        """`other` sends to this one's receiver: its URL, and the process itself (`receiver_placement` reads its
        workers' connections; a copy given only the URL failed there, in `make bench`'s one-call pairs)."""
        other.receiver, other.receiver_url = self.receiver, self.receiver_url
        other.receiver_port = self.receiver_port
        other.env["RECEIVER_URL"] = self.receiver_url
        return other

    def drop_source(self) -> None:
        """The source database of `with_own_source`, dropped once its processes have stopped."""
        self.stop()
        with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.source}" WITH (FORCE)')

    def _migrate(self, names: list[str]) -> None:
        source, delivery = names
        env = {**self.env, "DATABASE_URL": url(source), "DELIVERY_DATABASE_URL": url(delivery)}
        for args in (["migrate", "-v0"], ["migrate", "--database", "delivery", "-v0"]):
            subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True)

    def spawn(
        self, args: list[str], log_name: str, listen: int = 0, **env: str
    ) -> subprocess.Popen:
        """Start `args`; with `listen` (a port of `port()`), "{fd}" in them is a socket bound to it."""
        log = open(self.log_dir / log_name, "wb")  # noqa: SIM115 - lives as long as the process
        sock = self.ports[listen].listener() if listen else None
        fds = (sock.fileno(),) if sock else ()
        try:
            proc = subprocess.Popen(
                [arg.replace("{fd}", str(fds[0])) if fds else arg for arg in args],
                cwd=ROOT,
                env={**self.env, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=fds,
            )
        finally:
            if sock:
                sock.close()
        self.procs.append(proc)
        if self not in _STARTED:
            _exit_on_sigterm()
            _STARTED.append(self)
        return proc

    def start_receiver(
        self,
        workers: int = 0,
        threads: int = RECEIVER_THREADS,
        port: int = 0,
        app: str = "config.wsgi",
        worker_class: str = "gthread",
    ) -> str:
        """The receiver under gunicorn on `port` (one of `port()`; a new one when 0); waits until it answers.
        `workers` defaults to gunicorn's own recommendation, 2 × cores + 1. With only as many workers as cores,
        the receiver's rate depended on which worker process each client's keep-alive connection happened to
        land on (3 of 4 on one process, whose threads share one interpreter lock, and it answered a third
        less). Measured on 2 cores,
        five back-to-back measurements of 4 plain clients each: 334-503 creates/s against 2 workers, 494-506/s
        against 5 (the first measurement, on workers that had not answered yet, left out). `app`: the WSGI
        callable gunicorn serves and `worker_class` its workers (`bench/receiver_timing.py` times each create
        call for the latency runs)."""
        workers = workers or RECEIVER_WORKERS
        port = port or self.port()
        self.receiver_port = port
        self.receiver = self.spawn(
            [
                str(Path(PYTHON).with_name("gunicorn")),
                app,
                "--bind",
                "fd://{fd}",
                "--workers",
                str(workers),
                "--worker-class",
                worker_class,
                "--threads",
                str(threads),
            ],
            f"receiver-{port}.log",
            listen=port,
        )
        self.receiver_url = f"http://127.0.0.1:{port}/delivery/api"
        self.env["RECEIVER_URL"] = self.receiver_url
        for _ in range(150):
            try:
                alive = self.receiver_url.replace("/delivery/api", "/healthz")
                if httpx.get(alive, timeout=5).status_code == 200:
                    return self.receiver_url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"receiver did not start; see {self.log_dir / f'receiver-{port}.log'}")

    def start_dispatchers(self, count: int, tag: str, **env: str) -> list[subprocess.Popen]:
        return [
            self.spawn(
                [
                    PYTHON,
                    "manage.py",
                    "dispatch",
                    "--worker",
                    f"{tag}-{n}",
                    "--idle-sleep",
                    "0.5",
                    "--maintain-every",
                    "5",
                ],
                f"dispatcher-{tag}-{n}.log",
                **env,
            )
            for n in range(count)
        ]

    def dispatchers_started(self, procs: list[subprocess.Popen], timeout: float = 300) -> float:
        """Until each dispatcher started (`start_dispatchers`, or `bench/concurrent_dispatch.py`) has beaten
        once (`dispatchers_beaten`) and as many sessions LISTEN for wake-ups on the source database: a measured
        run starts after that, never a fixed time after the starts. The seconds waited."""
        started = time.monotonic()
        var_dir = Path(self.env.get("HANDOFF_VAR_DIR") or ROOT / "var")
        dispatchers_beaten(var_dir, procs, timeout)
        listening = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND query LIKE 'LISTEN %%'"
        )
        while self.scalar(listening, params=(self.source,)) < len(procs):
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{len(procs)} dispatchers not all listening in {timeout:g} s")
            time.sleep(0.05)
        return time.monotonic() - started

    @contextmanager
    def kept_running(self, count: int, tag: str):
        """`count` dispatchers (`start_dispatchers`) started once for every run of a figure, stopped after it.
        A start imports the whole product, about 2 s of CPU a process, which no measured run counts
        (`dispatchers_started`) but every run paid in wall time: 8 dispatchers took about 9 s to start on 2
        cores, and bench/e2e.py started 111 (now 49). Between runs they idle as a deployment's do (a poll
        every 0.5 s, maintenance every 5 s) while the tables are emptied, filled, or a reference measured."""
        procs = self.start_dispatchers(count, tag)
        try:
            self.dispatchers_started(procs)
            yield procs
        finally:
            self.stop(procs)

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
        if procs is None:
            for held in self.ports.values():
                held.close()
            self.ports.clear()

    @contextmanager
    def sql(self, which: str = "source"):
        with psycopg.connect(
            dsn(self.source if which == "source" else self.delivery), autocommit=True
        ) as conn:
            yield conn

    def scalar(self, query: str, which: str = "source", params=None):
        with self.sql(which) as conn:
            return conn.execute(query, params).fetchone()[0]


def _not_migrated(names: list[str]) -> None:
    raise RuntimeError(
        f"{names}: a copy of its own source wants the templates `Bench.setup` migrated first"
    )


def dispatchers_beaten(var_dir: Path, procs: list[subprocess.Popen], timeout: float = 300) -> float:
    """Until each of `procs` (each started with `--worker <name>`) has written its first heartbeat under
    `var_dir` (`outbox/dispatch/heartbeat.py`, after the first supervision pass; read here without a Django
    process of its own), its pid that of the process started, so that an earlier process's beat does not
    count. A start imports the whole product, about 2 s of CPU a process: 4 started together kept both cores
    busy past the fixed 2.5 s the sections used to wait, and the measured run paid for the rest of their
    start. The seconds waited; a process that exits first, or a wait past `timeout`, raises."""
    started = time.monotonic()
    waiting = {proc.pid: proc.args[proc.args.index("--worker") + 1] for proc in procs}
    while waiting:
        for pid, worker in list(waiting.items()):
            beat = var_dir / "heartbeats" / (re.sub(r"[^A-Za-z0-9._-]", "_", worker) + ".json")
            with contextlib.suppress(OSError, ValueError, KeyError):
                if json.loads(beat.read_text())["pid"] == pid:
                    del waiting[pid]
        if any(proc.poll() is not None for proc in procs):
            raise RuntimeError(f"a dispatcher exited before its first beat: {waiting}")
        if time.monotonic() - started > timeout:
            raise RuntimeError(
                f"dispatchers {sorted(waiting.values())} did not beat in {timeout:g} s"
            )
        time.sleep(0.05)
    return time.monotonic() - started


# How a run's keep-alive connections fall on the receiver's workers, and the CPU of the processes that did the work
# (bench/outside_check.py; the receiver's reference, bench/receiver_capacity.py, says why it matters).


def process_cpu(pid: int) -> float:
    """User and system CPU seconds of `pid` so far (Linux /proc), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """`process_cpu` of `root` and its children (gunicorn's master and its workers)."""
    return process_cpu(root) + sum(process_cpu(pid) for pid in workers_of(root))


def workers_of(root: int) -> list[int]:
    """The processes whose parent is `root` (gunicorn's workers)."""
    children = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == root:
                children.append(int(name))
    return children


def _state(pid: int) -> str:
    """The process's state letter (Linux /proc: R, S, T for stopped, Z...), "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants at once, as a machine's crash would (a django-q2 cluster is
    three levels deep). Each is stopped (SIGSTOP) and seen stopped before its children are listed, top down,
    so that none starts another between the listing and the kill: django-q2's sentinel replaces a dead worker
    at once, and killing the workers first (as bench/e2e.py did) left the replacement running, orphaned (a
    `manage.py qcluster` found still running after an idle `make bench`, 2026-12-07)."""
    stopped: list[int] = []

    def stop(target: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGSTOP)
            stopped.append(target)
            deadline = time.monotonic() + 5
            while _state(target) not in ("T", "t", "Z", "X", "") and time.monotonic() < deadline:
                time.sleep(0.001)
            for child in workers_of(target):
                stop(child)

    stop(pid)
    for target in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)


def established_on(port: int) -> set[str]:
    """The socket inodes of the established TCP connections whose local end is `port` (Linux /proc/net)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def connections_held(pids: list[int], port: int) -> list[int]:
    """How many established connections on local `port` each of `pids` holds, for those holding any, most
    first: [3, 1] is three on one process and one on another."""
    wanted = established_on(port)
    held = []
    for pid in pids:
        if count := sum(1 for link in socket_links(pid) if link[len("socket:[") : -1] in wanted):
            held.append(count)
    return sorted(held, reverse=True)


def socket_links(pid: int) -> list[str]:
    """The `socket:[<inode>]` links of `pid`'s open files; none once it is gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    links = []
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue
        if link.startswith("socket:["):
            links.append(link)
    return links


@contextmanager
def receiver_placement(bench: Bench):
    """How the run's keep-alive connections fell on the receiver's workers (`connections_held`, sampled every
    0.25 s while the run goes; the placement seen most often), in the yielded dict's "placement". The
    receiver's CPU a create depends on it: gunicorn's worker accepting a connection keeps it, and a worker
    holding several connections answers each for less CPU than several workers holding one each."""
    workers, seen, done = workers_of(bench.receiver.pid), Counter(), threading.Event()

    def sample() -> None:
        while not done.wait(0.25):
            if held := connections_held(workers, bench.receiver_port):
                seen[tuple(held)] += 1

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result: dict = {}
    try:
        yield result
    finally:
        done.set()
        sampler.join()
        result["placement"] = list(seen.most_common(1)[0][0]) if seen else []


# Delivered rows preloaded by the growth runs and by reconciliation get numbers from here up, so they never
# meet the keys of the handoffs a run creates (numbered from 1).
PRELOAD_FIRST = 1_000_000_000


def key_sql(workspace: int = 7) -> str:
    """The action key of row `n`, as SQL."""
    return f"'onboarding:{workspace}:' || n || ':1'"


# The payload's canonical JSON (sorted keys, compact), so the hash is the one the receiver computes.
CANONICAL_SQL = """'{"client_name":"Client ' || n || '","plan":"standard"}'"""
HASH_SQL = "encode(sha256(convert_to(p.canonical, 'UTF8')), 'hex')"
# The receiver's task id of delivered row `n`: a function of n, so both sides can be filled apart and agree.
TASK_ID_SQL = "lpad(to_hex(n), 32, '0')::uuid"


def insert_handoffs_sql(
    first: int, count: int, *, state: str = "pending", workspace: int = 7
) -> str:
    """One INSERT … SELECT generate_series: `count` handoffs with distinct keys, due now. Delivered rows
    carry the task id and work status ('open') that `insert_receiver_tasks_sql` gives their receiver tasks,
    as if an earlier reconciliation had recorded it."""
    delivered = state == "delivered"
    # Only integers and fixed words are formatted in; this builds benchmark data, never user input.
    return f"""
        INSERT INTO outbox_handoff (action_key, workflow, workspace_id, source_ref, source_id, rule_version,
            payload, payload_hash, destination, state, attempts, attempts_in_run, next_attempt_at, lease_owner,
            fencing_epoch, destination_id, failure_class, reason_code, last_error, created_at, updated_at,
            delivered_at,
            instance_key, step, step_index, kind, plan, compensation_state, compensation_operation, work_status,
            receipt)
        SELECT {key_sql(workspace)}, 'onboarding', {workspace}, 'request ' || n, n,
            'onboarding-v1', p.canonical::jsonb, {HASH_SQL}, 'receiver',
            '{state}', {1 if delivered else 0}, {1 if delivered else 0}, t.at, '', 0,
            {TASK_ID_SQL + "::text" if delivered else "''"}, '', '', '', t.at, t.at, {"t.at" if delivered else "NULL"},
            '', '', 0, 'action', '[]'::jsonb, '', '', '{"open" if delivered else ""}', '{{}}'::jsonb
        FROM generate_series({first}, {first + count - 1}) AS n,
             LATERAL (SELECT {CANONICAL_SQL} AS canonical) p,
             -- One microsecond apart, the last at the transaction's start: distinct and cheap (clock_timestamp()
             -- per column was a third of a 10,000,000-row fill).
             LATERAL (SELECT now() - ({first + count - 1} - n) * interval '1 microsecond' AS at) t
    """


def insert_receiver_tasks_sql(first: int, count: int, *, workspace: int = 7) -> str:
    """The receiver tasks that match `insert_handoffs_sql(first, count, state="delivered")` row for row:
    same action key, payload hash and task id, status 'open'."""
    return f"""
        INSERT INTO delivery_receivertask (task_id, action_key, payload, payload_hash, status, created_at)
        SELECT {TASK_ID_SQL}, {key_sql(workspace)}, p.canonical::jsonb, {HASH_SQL}, 'open', now()
        FROM generate_series({first}, {first + count - 1}) AS n,
             LATERAL (SELECT {CANONICAL_SQL} AS canonical) p
    """


def secondary_indexes(conn: psycopg.Connection, table: str) -> list[tuple[str, str, str]]:
    """(index, its CREATE INDEX statement, the unique constraint it backs or '') for every index of `table`
    that a bulk fill may drop and recreate, read from the catalog: whatever the migrations made, partial
    indexes included. Kept in place: the primary key, and indexes that back any other kind of constraint
    (deferrable, exclusion) or that a foreign key depends on."""
    return conn.execute(
        """
        SELECT i.indexname, i.indexdef, coalesce(c.conname, '')
        FROM pg_indexes i
        JOIN pg_class ic ON ic.relname = i.indexname AND ic.relnamespace = to_regnamespace(i.schemaname)
        JOIN pg_index x ON x.indexrelid = ic.oid
        LEFT JOIN pg_constraint c ON c.conindid = ic.oid AND c.conrelid = x.indrelid AND c.contype <> 'f'
        WHERE i.schemaname = current_schema() AND i.tablename = %s AND NOT x.indisprimary
          AND (c.oid IS NULL OR (c.contype = 'u' AND NOT c.condeferrable))
          AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = ic.oid)
        ORDER BY i.indexname
    """,
        (table,),
    ).fetchall()


def bulk_fill(dsn_: str, table: str, statement: str) -> float:
    """Run one INSERT … SELECT into `table` the fast way, then leave the table as a long-lived one would be:
    its secondary indexes dropped for the fill and recreated after from the statements the catalog held
    (the same indexes, built by sorting instead of one entry at a time, one a core at once, longest first:
    `build_indexes`), vacuumed (visibility map set, and nothing left for autovacuum to start during a
    measurement), analyzed and checkpointed. `synchronous_commit` off for the fill's session only, and its
    foreign keys not checked row by row (`session_replication_role = replica`, that session only: the
    constraints stay, validated, for every other session): each fill's references are right by construction
    (an event's or an attempt's handoff is read from the table it references), and a million rows' deferred
    checks, queued to the commit, were two thirds of a history fill (2026-12-07, retention's fill of
    1,000,000 handoffs, then their attempts and events, in 3 interleaved pairs at loads 30-36: the whole fill
    0.645, 0.681 and 0.581 of its time with the checks, median 0.645; the history alone about 0.3).
    Returns seconds."""
    started = time.monotonic()
    with psycopg.connect(dsn_, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET session_replication_role = replica")
        indexes = secondary_indexes(conn, table)
        _drop_indexes(conn, table, indexes)
        try:
            conn.execute(statement)
        finally:  # the schema under test is put back even when the fill fails
            build_indexes(dsn_, indexes)
            _attach_constraints(conn, table, indexes)
        conn.execute(f'VACUUM (ANALYZE) "{table}"')
        conn.execute("CHECKPOINT")
    return time.monotonic() - started


def bulk_fill_concurrently(*fills: tuple[str, str, str]) -> float:
    """Several `bulk_fill(dsn, table, statement)` at once, one connection each (the source and the receiver
    databases fill side by side). Returns the seconds until the last is done."""
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(fills)) as pool:
        for future in [pool.submit(bulk_fill, *fill) for fill in fills]:
            future.result()
    return time.monotonic() - started


class SplitFill(NamedTuple):
    """What `bulk_fill_split` took: the rows' insert, then the indexes' builds and the ANALYZE."""

    fill_seconds: float
    index_seconds: float
    # Each index's build, by name: the longest bounds `index_seconds` however many sessions build.
    builds: dict[str, float]


def bulk_fill_split(
    dsn_: str, table: str, statement: str, rows: int, *, sessions: int = 0
) -> SplitFill:
    """`bulk_fill` for a fill too large for one core: `statement` (an INSERT … SELECT over
    `generate_series(%(first)s, %(last)s)`) runs in `sessions` connections at once (default: one a core),
    each over its share of 1..`rows`, with the table's secondary indexes dropped and foreign-key triggers
    off (`session_replication_role = replica`: the deferred checks of every row's empty references were
    queued until commit); then the indexes are rebuilt from the catalog's statements by as many connections,
    the longest (GIN) first, each sorting in its own `maintenance_work_mem`, and the table ANALYZEd.
    Autovacuum is off for the table, so that no pass over it lands in a measurement. The table stays logged:
    the tables that reference it are logged, so it cannot be UNLOGGED without dropping their keys."""
    from concurrent.futures import ThreadPoolExecutor

    sessions = sessions or os.cpu_count() or 1
    bounds = [(rows * k // sessions + 1, rows * (k + 1) // sessions) for k in range(sessions)]

    def insert(first: int, last: int) -> None:
        with psycopg.connect(dsn_, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = off")
            conn.execute("SET session_replication_role = replica")
            conn.execute(statement, {"first": first, "last": last})

    with psycopg.connect(dsn_, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')
        indexes = secondary_indexes(conn, table)
        _drop_indexes(conn, table, indexes)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=sessions) as pool:
            for future in [pool.submit(insert, *bound) for bound in bounds]:
                future.result()
        filled = time.monotonic() - started
        # The rows carry their own ids: the next insert's default starts after them.
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence(%s, 'id'), (SELECT max(id) FROM \"{table}\"))",
            (table,),
        )
        started = time.monotonic()
        builds = build_indexes(dsn_, indexes, sessions=sessions)
        _attach_constraints(conn, table, indexes)
        conn.execute(f'ANALYZE "{table}"')
        return SplitFill(filled, time.monotonic() - started, builds)


def build_indexes(
    dsn_: str, indexes: list[tuple[str, str, str]], *, sessions: int = 0
) -> dict[str, float]:
    """The catalog's statements of `indexes` (`secondary_indexes`) run by `sessions` connections at once
    (default: one a core), the GIN ones first (the longest, and one core each whatever the setting), each
    sorting in its own `maintenance_work_mem` with no parallel workers of its own (one build a core already).
    Returns each build's seconds by index name."""
    from concurrent.futures import ThreadPoolExecutor

    def build(definition: str) -> float:
        with psycopg.connect(dsn_, autocommit=True) as conn:
            conn.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
            conn.execute("SET max_parallel_maintenance_workers = 0")
            began = time.monotonic()
            conn.execute(definition)
            return time.monotonic() - began

    longest_first = sorted(indexes, key=lambda index: " USING gin " not in index[1])
    with ThreadPoolExecutor(max_workers=sessions or os.cpu_count() or 1) as pool:
        futures = {index[0]: pool.submit(build, index[1]) for index in longest_first}
        return {name: future.result() for name, future in futures.items()}


def _drop_indexes(
    conn: psycopg.Connection, table: str, indexes: list[tuple[str, str, str]]
) -> None:
    for name, _, constraint in indexes:
        conn.execute(
            f'ALTER TABLE "{table}" DROP CONSTRAINT "{constraint}"'
            if constraint
            else f'DROP INDEX "{name}"'
        )


def _attach_constraints(
    conn: psycopg.Connection, table: str, indexes: list[tuple[str, str, str]]
) -> None:
    """The unique constraints back on their rebuilt indexes (a build under SHARE lock let the others run)."""
    for name, _, constraint in indexes:
        if constraint:
            conn.execute(
                f'ALTER TABLE "{table}" ADD CONSTRAINT "{constraint}" UNIQUE USING INDEX "{name}"'
            )


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
