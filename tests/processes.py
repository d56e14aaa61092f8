"""What tests that start real processes share: where the repository is, the test databases as URLs for
the child processes, and a free local port."""

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
