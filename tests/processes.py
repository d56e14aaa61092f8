"""What tests that start real processes share: where the repository is, the test databases as URLs for
the child processes, and local ports taken from the kernel."""

import contextlib
import functools
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# The tests' own calls to the local servers they started (liveness polls while one starts, test-only state and
# fault endpoints). `httpx.get()` builds a client for each call, and a client's SSL context (the CA bundle
# loaded, though these calls are plain HTTP) cost 27 ms of CPU a call: a poll every 0.1 s while a receiver
# started spent a quarter of a core on it (docs/testing.md). One client, its context built once: 0.2 ms a
# call. No keep-alive, as with `httpx.get()`: every call opens a connection of its own, so a server stopped
# and started again on its port is never asked on a connection its predecessor accepted.
#
# The client, httpx and Django are imported at the first call, not with this module: each test server runs as a
# process of its own from the module that also holds its test-side class (`python -m tests.providers.stripe`),
# imports this module, and never calls; importing httpx and django.db cost each of those processes 0.16 s of CPU
# (about 150 servers a `make test`, docs/testing.md).
class LocalHttp:
    """The one client for local calls (`LOCAL_HTTP.get(...)`, `.post(...)`), built at its first use."""

    def __init__(self):
        self._client = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            import httpx

            self._client = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))
        return getattr(self._client, name)


LOCAL_HTTP = LocalHttp()


def loaded_deadline(seconds: float) -> float:
    """`seconds` as a deadline for work that needs the CPU (a child's whole migrate, a first start), stretched by
    how many runnable processes each core has now: a fresh clone's `make test` at a load of 35 on 2 cores gave
    the previous release's migrate (about 20 s of CPU) a twentieth of a core, and 600 s were not enough. On an
    idle machine the deadline is `seconds` itself."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * max(1.0, per_core)


def bytecode_cache() -> dict[str, str]:
    """The environment a child started with a bare environment keeps so that it reads the run's bytecode
    caches (the Makefile exports PYTHONPYCACHEPREFIX): without it, every such child compiled Django and the
    product from source, seconds of CPU a process on a loaded machine."""
    prefix = os.environ.get("PYTHONPYCACHEPREFIX", "")
    return {"PYTHONPYCACHEPREFIX": prefix} if prefix else {}


def database_url(alias: str) -> str:
    """The test database of `alias` as a DATABASE_URL a child process can use."""
    # Imported at the call: a test server's own process never asks (LOCAL_HTTP, above).
    from django.db import connections

    s = connections[alias].settings_dict
    host = s.get("HOST") or "/var/run/postgresql"
    auth = f"{s['USER']}@" if s.get("USER") else ""
    port = f":{s['PORT']}" if s.get("PORT") else ""
    if host.startswith("/"):
        return f"postgres://{auth}{port}/{s['NAME']}?host={host}"
    return f"postgres://{auth}{host}{port}/{s['NAME']}"


# Django runs every system check when a command that asks for them starts (`dispatch`, `reconcile`, `qcluster`
# and the product's others: Django's default), unless told `--skip-checks`. The checks import the URLconf, and
# with it every view and the sign-in backends: a `dispatch --once` with no receiver took 0.81 s of CPU with
# them and 0.60 s without (seven interleaved pairs, median ratio 0.75), in about a hundred places that start
# a command in the fault, long and hosts streams. What the checks refuse is tested where they are
# (tests/outbox/destinations/test_seed_variables.py, tests/incidents/test_mail_auth.py), and a deployed command
# still runs them (tests/faults/test_process_starts.py); the processes a test starts to make faults skip them.
def manage_argv(command: str, *args: str) -> list[str]:
    """`python manage.py command args` as a test starts it: `--skip-checks` after a command that would run the
    system checks (a command that runs none, `shell` or `check`, refuses the option)."""
    checks = ("--skip-checks",) if _runs_system_checks(command) else ()
    return [sys.executable, "manage.py", command, *checks, *args]


@functools.cache
def _runs_system_checks(command: str) -> bool:
    # Imported at the call, as in `database_url`: a test server's own process never asks.
    from django.core.management import get_commands, load_command_class

    return bool(load_command_class(get_commands()[command], command).requires_system_checks)


def migrated_template_dump(alias: str) -> Path | None:
    """`make test`'s migrated template of `alias` as SQL (HANDOFF_TEST_TEMPLATE, dumped by
    scripts/test_template.sh), for a private server to load instead of migrating (`PostgresServer.load`);
    None in a run without one, whose private servers migrate. A file, not the template database itself: a
    session on the template would make the streams' copies of it fail."""
    template = os.environ.get("HANDOFF_TEST_TEMPLATE")
    if not template:
        return None
    dump = (
        ROOT
        / "var"
        / "test-template"
        / f"{template}{'_delivery' if alias == 'delivery' else ''}.sql"
    )
    return dump if dump.exists() else None


# Ports come from the kernel (bind to port 0), never from a guess: a port found free now and bound by a child
# later may be taken in between by anything on the machine (at load ~11 a dispatcher's key listing was
# answered by another process that had taken a freed port, and a security incident paged). The parent holds
# the port for the whole test with a socket that is bound but does not listen, so that
# - connections to it are refused while no server listens (an outage stays an outage: a listening socket
#   held by the parent would queue them instead, and the client would wait for its read timeout);
# - nothing else can bind it, in particular while a test has stopped its server to bring it back later: a
#   bind without SO_REUSEPORT conflicts with the holder, SO_REUSEADDR alone does not pass (the holder does
#   not set it), and the kernel hands neither a client's nor a `bind(0)` server's port out of a bound one;
# - the server's own socket joins it: `listener()` binds a second socket to the port with SO_REUSEPORT (the
#   kernel allows it to a socket of the same user that also sets it) and the child inherits that socket
#   (`pass_fds`, gunicorn `--bind fd://N`, `serve_http_on_fd`), listening on it; when the child exits, the
#   holder is left and the port refuses again. A child that cannot take a socket binds port 0 itself and
#   prints the address it got (tests/sso/scripted.py, `manage.py demo_mailbox`).


class KernelPort:
    """A local port the kernel chose, held (bound, not listening) until `close()`."""

    def __init__(self, host: str = "127.0.0.1"):
        self.host = host
        self._holder = socket.socket()
        self._holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self._holder.bind((host, 0))
        self.port: int = self._holder.getsockname()[1]

    def listener(self) -> socket.socket:
        """A socket bound to the port, for a child to listen on: pass `fileno()` with `pass_fds` and close
        it in the parent once the child has started (the parent's copy would keep it open after the child
        exits)."""
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((self.host, self.port))
        sock.set_inheritable(True)
        return sock

    def close(self) -> None:
        self._holder.close()

    def __enter__(self) -> "KernelPort":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def popen_listening(
    args_for_fd: Callable[[int], list[str]], port: KernelPort, **popen
) -> subprocess.Popen:
    """Start `args_for_fd(fd)` with a listener on `port` as its inherited descriptor `fd`."""
    sock = port.listener()
    try:
        return subprocess.Popen(args_for_fd(sock.fileno()), pass_fds=(sock.fileno(),), **popen)
    finally:
        sock.close()


def serve_http_on_fd(fd: int, handler) -> ThreadingHTTPServer:
    """The child's side: a threading HTTP server listening on the inherited socket `fd`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
    server.socket.close()
    server.socket = socket.socket(fileno=fd)
    server.server_address = server.socket.getsockname()
    server.server_name, server.server_port = server.server_address[:2]
    server.server_activate()
    return server


class Gate:
    """A local port that passes connections on to a server's, or refuses them, as the test says: an outage of
    a server without stopping its process (`down()`, `up()`). While down, the gate's port is held and does not
    listen (KernelPort): a client's connect is refused, as it is when the server's process has exited, and the
    connections open through the gate are closed. The server process keeps running, so that coming back costs
    no start (a gunicorn receiver imports Django again: tests/faults/test_incident_paging.py)."""

    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self.held = KernelPort(host)
        self.port = self.held.port
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listening: socket.socket | None = None
        self.up()

    def up(self) -> None:
        sock = self.held.listener()
        sock.listen(64)
        self._listening = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def down(self) -> None:
        sock, self._listening = self._listening, None
        if sock is not None:
            # shutdown wakes the accepting thread (Linux: accept returns EINVAL); the port refuses from here on.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        with self._lock:
            connections, self._open = self._open, []
        for each in connections:
            with contextlib.suppress(OSError):
                each.shutdown(socket.SHUT_RDWR)
            each.close()

    def close(self) -> None:
        self.down()
        self.held.close()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                client, _ = sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=30)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
