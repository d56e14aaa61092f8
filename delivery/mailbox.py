"""The demo's mailbox: an SMTP server on this machine that keeps every message it accepts as a file, and
the reads of those files for the mailbox page. The e-mail destination of the demo (its welcome pack) sends
here, so a person can see what was sent, once, with its Message-ID."""

import email
import email.policy
import socket
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox


@dataclass(frozen=True)
class Stored:
    """One message as the mailbox page shows it."""

    name: str
    message_id: str
    sender: str
    to: str
    subject: str
    date: str
    body: str


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


def _read(path: Path) -> Stored:
    message: EmailMessage = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    part = message.get_body(preferencelist=("plain",))
    return Stored(
        name=path.name,
        message_id=message.get("Message-ID", ""),
        sender=message.get("From", ""),
        to=message.get("To", ""),
        subject=message.get("Subject", ""),
        date=message.get("Date", ""),
        body=part.get_content() if part is not None else "",
    )


def mailbox_messages(directory: Path) -> list[Stored]:
    """Every message delivered to the Maildir, newest first."""
    files = [p for sub in ("new", "cur") for p in (directory / sub).glob("*") if p.is_file()]
    return [_read(p) for p in sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)]
