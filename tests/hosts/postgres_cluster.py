"""PostgreSQL servers of a test's own: a primary and its streaming replicas, started from Debian's binaries
(/usr/lib/postgresql/<version>/bin) with data directories under a directory the test names (the run's var
dir), never the machine's main cluster.

A server listens on a Unix socket in its own directory (any port number is then free of clashes) and, when
given `listen_addresses`, on TCP too: the network-namespace harness passes an address of the namespace and a
`command_prefix` (`["ip", "netns", "exec", "db1"]`) that every server command runs under. initdb and postgres
refuse to run as root, so as root every command runs as the `postgres` user.

Replication is asynchronous, as most deployments run it: a commit is acknowledged before the replica has it.
`cut_replication()` stops the primary from shipping (a replica that lags or is cut off), so that a test can
make the primary commit what the replica will never see and then fail over to it.
"""

import contextlib
import getpass
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

START_TIMEOUT = 120  # seconds: the suite must pass at a load of 10
HBA_OPEN = """\
local   all             all                                     trust
local   replication     all                                     trust
host    all             all             0.0.0.0/0               trust
host    all             all             ::/0                    trust
host    replication     all             0.0.0.0/0               trust
host    replication     all             ::/0                    trust
"""
HBA_NO_REPLICATION = """\
local   replication     all                                     reject
host    replication     all             0.0.0.0/0               reject
host    replication     all             ::/0                    reject
local   all             all                                     trust
host    all             all             0.0.0.0/0               trust
host    all             all             ::/0                    trust
"""


def postgres_bindir() -> Path:
    """The newest installed PostgreSQL server's binaries (Debian's postgresql-<version> package)."""
    candidates = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/initdb")]
    if not candidates:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    return max(candidates, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)


@dataclass
class PostgresServer:
    """One server: its data directory, socket directory and port. `root` is created if missing."""

    root: Path
    port: int = 5432
    listen_addresses: str = ""
    command_prefix: list[str] = field(default_factory=list)
    bindir: Path = field(default_factory=postgres_bindir)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "server.log"
        self.as_root = os.geteuid() == 0
        self.user = getpass.getuser()

    # -- commands ---------------------------------------------------------------------------------------

    def run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / program), *args]
        if self.as_root:
            cmd = ["su", "postgres", "-c", shlex.join(cmd)]
        done = subprocess.run(
            [*self.command_prefix, *cmd], capture_output=True, text=True, timeout=START_TIMEOUT
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{program} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        return done

    def _pg_ctl(self, *args: str) -> None:
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses='{self.listen_addresses}'"
            " -c fsync=off"
        )
        self.run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(START_TIMEOUT),
            "-o",
            options,
            *args,
        )

    def _own_dirs(self) -> None:
        self.sockets.mkdir(parents=True, exist_ok=True)
        # The postgres user must reach the data directory: a parent made by mkdtemp is 0700.
        self.root.parent.chmod(self.root.parent.stat().st_mode | 0o755)
        if self.as_root:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sockets, "postgres")

    # -- life cycle -------------------------------------------------------------------------------------

    def initdb(self) -> None:
        """A new cluster ready to be a primary: replication allowed from anywhere (trust: test only), the
        test user a superuser."""
        self._own_dirs()
        self.run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\nwal_level = replica\nmax_wal_senders = 10\nhot_standby = on\n"
                "wal_keep_size = '256MB'\nsynchronous_commit = on\nmax_connections = 200\n"
            )
        (self.data / "pg_hba.conf").write_text(HBA_OPEN)

    def start(self) -> None:
        self._own_dirs()
        self._pg_ctl("start")
        if self.user != "postgres" and not self.is_in_recovery():
            self.sql(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{self.user}') "
                f'THEN CREATE ROLE "{self.user}" SUPERUSER LOGIN; END IF; END $$',
                user="postgres",
            )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (clients disconnected, a clean shutdown) or `immediate` (a crash: what it
        committed and did not ship stays only on its disk)."""
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("-m", mode, "stop")

    def promote(self) -> None:
        """Make this replica a primary; returns once it accepts writes."""
        self._pg_ctl("promote")
        deadline = time.monotonic() + START_TIMEOUT
        while self.is_in_recovery():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.root} still in recovery after promote")
            time.sleep(0.1)

    def replica(self, root: Path, *, port: int | None = None, source_host: str | None = None):
        """A streaming replica of this (running) server: `pg_basebackup -R` into `root`, started. It
        connects to `source_host` (an address of this server) or else this server's socket directory."""
        replica = PostgresServer(
            root,
            port=port or self.port,
            listen_addresses=self.listen_addresses if port is None else "",
            command_prefix=list(self.command_prefix),
            bindir=self.bindir,
        )
        replica._own_dirs()
        self.run(
            "pg_basebackup",
            "-D",
            str(replica.data),
            "-h",
            source_host or str(self.sockets),
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-X",
            "stream",
            "-R",
            "--no-sync",
        )
        replica.start()
        return replica

    # -- replication ------------------------------------------------------------------------------------

    def cut_replication(self) -> None:
        """Refuse replication connections and end the ones open: the replica keeps serving reads, frozen
        at what it had, and everything this server commits from now on stays here alone."""
        (self.data / "pg_hba.conf").write_text(HBA_NO_REPLICATION)
        self.sql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + START_TIMEOUT
        while self.sql(
            "SELECT count(*) FROM pg_stat_replication",
        )[0][0]:
            self.sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'walsender'"
            )
            if time.monotonic() > deadline:
                raise RuntimeError("walsenders still connected after the replication cut")
            time.sleep(0.1)

    def wait_replayed_by(self, replica: "PostgresServer") -> None:
        """Wait until `replica` has replayed everything this server has written so far."""
        target = self.sql("SELECT pg_current_wal_lsn()::text")[0][0]
        deadline = time.monotonic() + START_TIMEOUT
        while not replica.sql("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", params=(target,))[0][
            0
        ]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica {replica.root} did not replay up to {target}")
            time.sleep(0.1)

    def is_in_recovery(self) -> bool:
        return self.sql("SELECT pg_is_in_recovery()", user="postgres")[0][0]

    # -- clients ----------------------------------------------------------------------------------------

    def connect(self, dbname: str = "postgres", user: str | None = None) -> psycopg.Connection:
        return psycopg.connect(
            host=str(self.sockets),
            port=self.port,
            dbname=dbname,
            user=user or self.user,
            autocommit=True,
            connect_timeout=10,
        )

    def sql(
        self, statement: str, *, dbname: str = "postgres", user: str | None = None, params=None
    ) -> list[tuple]:
        with self.connect(dbname, user) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def load(self, dump: Path, dbname: str, *, user: str | None = None) -> None:
        """Load `dump` (SQL: `make test`'s migrated template) into `dbname` here, as `user` (the server's
        own when None): a second or two, where a migrate costs 20 s of CPU."""
        url = self.url(dbname)
        if user:
            url = url.replace(f"//{self.user}@", f"//{user}@")
        done = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), url],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
        )
        if done.returncode != 0:
            raise RuntimeError(f"loading {dump} into {dbname} failed:\n{done.stderr[-3000:]}")

    def url(self, dbname: str) -> str:
        """A DATABASE_URL for this server alone (its socket directory)."""
        return f"postgres://{self.user}@:{self.port}/{dbname}?host={self.sockets}"


def multi_host_url(servers: list[PostgresServer], dbname: str) -> str:
    """One DATABASE_URL naming every server (libpq tries them in order) and asking for the one that
    accepts writes: after a failover the clients find the promoted replica by themselves."""
    hosts = ",".join(str(s.sockets) for s in servers)
    ports = ",".join(str(s.port) for s in servers)
    user = servers[0].user
    return f"postgres://{user}@/{dbname}?host={hosts}&port={ports}&target_session_attrs=read-write"


@contextlib.contextmanager
def primary_with_replica(root: Path, *, port: int = 5432):
    """A primary and one streaming replica under `root` (`root/primary`, `root/replica`), both stopped
    (immediately) and their directories removed on the way out."""
    primary = PostgresServer(Path(root) / "primary", port=port)
    servers = [primary]
    try:
        primary.initdb()
        primary.start()
        servers.append(primary.replica(Path(root) / "replica"))
        yield primary, servers[1]
    finally:
        for server in servers:
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
