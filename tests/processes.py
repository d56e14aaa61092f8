"""What tests that start real processes share: where the repository is, the test databases as URLs for
the child processes, and a free local port."""

import os
import random
import socket
from pathlib import Path

from django.db import connections

ROOT = Path(__file__).resolve().parents[1]


def database_url(alias: str) -> str:
    """The test database of `alias` as a DATABASE_URL a child process can use."""
    s = connections[alias].settings_dict
    host = s.get("HOST") or "/var/run/postgresql"
    auth = f"{s['USER']}@" if s.get("USER") else ""
    port = f":{s['PORT']}" if s.get("PORT") else ""
    if host.startswith("/"):
        return f"postgres://{auth}{port}/{s['NAME']}?host={host}"
    return f"postgres://{auth}{host}{port}/{s['NAME']}"


# `make test` runs its suites side by side, and a test may stop a server and start it again on the same
# port (an outage). A port the kernel hands out (bind to 0) comes from the ephemeral range, where another
# suite's next server, or any client socket, may take it while ours is down: a parallel suite's receiver
# then answered our dispatcher with 401 in CI. So each suite takes its ports from a slice of its own
# (TEST_PORTS="first-last", set per suite by the Makefile), below the ephemeral range.
DEFAULT_PORTS = "20000-32000"


def _port_slice() -> range:
    first, last = (int(part) for part in os.environ.get("TEST_PORTS", DEFAULT_PORTS).split("-"))
    return range(first, last + 1)


def free_port() -> int:
    """A port of this suite's slice that nothing listens on now."""
    ports = _port_slice()
    for port in random.sample(ports, min(len(ports), 200)):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1} (TEST_PORTS)")
