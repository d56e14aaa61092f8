"""The demo's SMTP server: it keeps every message it accepts as a file in a Maildir, for the mailbox page
(delivery/mailbox.py) to show."""

import socket
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox


class SocketController(Controller):
    """aiosmtpd's controller serving on a socket bound already: its own binds the address only once it starts
    and cannot be asked for port 0 (it connects to the port it was given to check that it answers)."""

    def __init__(self, handler, *, sock: socket.socket, **options):
        self.sock = sock
        super().__init__(handler, hostname="127.0.0.1", port=sock.getsockname()[1], **options)

    def _create_server(self):
        return self.loop.create_server(self._factory_invoker, sock=self.sock, ssl=self.ssl_context)


def mailbox_server(directory: Path, *, port: int, fd: int | None = None) -> SocketController:
    """An SMTP server on 127.0.0.1:`port` (0: a port the kernel chooses, its `port` once bound), or on the
    bound socket `fd` handed down by whoever started it, that stores each accepted message in `directory`
    (Maildir)."""
    for part in ("tmp", "new", "cur"):  # a Maildir, even in a directory that exists already
        (directory / part).mkdir(parents=True, exist_ok=True)
    sock = socket.socket(fileno=fd) if fd is not None else socket.create_server(("127.0.0.1", port))
    return SocketController(Mailbox(str(directory)), sock=sock)
