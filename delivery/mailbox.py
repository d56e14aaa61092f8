"""The demo's mailbox page's reads: the messages the demo's SMTP server (delivery/mailbox_server.py) kept as
files. The e-mail destination of the demo (its welcome pack) sends there, so a person can see what was sent,
once, with its Message-ID. The server is a module of its own: every web process imports this one with its URLs,
and aiosmtpd (about 0.02 s of CPU to import) only `manage.py demo_mailbox` and the tests' SMTP server need."""

import email
import email.policy
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path


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
