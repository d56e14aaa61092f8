"""A real SMTP server (aiosmtpd) in a process of its own, for the tests of the smtp destination kind.

Run as `python -m tests.outbox.destinations.smtp_server DIR PORT [--user U --password P]
[--cert C --key K --implicit-tls]`. Every message it accepts is written to DIR/mailbox/<n>.eml (written
aside, then renamed: a reader never sees half a message). Faults are read from DIR/faults.json at each
command, so a test switches them while the server runs (`SmtpServer.faults(...)`):

- "mail": "421 ..." / "451 ..." / "550 ...": the answer to MAIL FROM instead of 250.
- "rcpt": "550 ..." / "451 ...": the answer to RCPT TO (the recipient refused).
- "data_end": what follows the message data:
    "drop": store the message, then close the connection without answering (the answer lost after DATA);
    "drop_unstored": close without answering and without storing;
    "hold": store the message, then answer 250 only once DIR/release exists (or after "hold_seconds");
      with "hold_message": n, only the n-th message stored is held, the others are answered at once;
    "451 ..." / "554 ...": answer that instead of 250, without storing.
- "data_delay": seconds to wait, after storing each message, before answering 250 (a slow server).

With --user/--password the server requires AUTH (LOGIN or PLAIN; 535 for other credentials, 530 for MAIL
before AUTH). With --cert/--key it offers STARTTLS (or, with --implicit-tls, speaks TLS from the start).

`SmtpServer` is the tests' side: it starts the process on a port the kernel chose, waits until it
answers, switches faults, reads the mailbox and stops the process.
"""

import argparse
import asyncio
import contextlib
import email
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from email.message import Message
from pathlib import Path

from aiosmtpd.smtp import AuthResult, LoginPassword

from delivery.mailbox_server import SocketController
from tests.processes import ROOT, KernelPort, popen_listening


class FaultyMailbox:
    """The aiosmtpd handler: faults from DIR/faults.json, accepted messages into DIR/mailbox."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.mailbox = directory / "mailbox"
        self.mailbox.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def faults(self) -> dict:
        try:
            return json.loads((self.directory / "faults.json").read_text())
        except FileNotFoundError:
            return {}

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        answer = self.faults().get("mail")
        if answer:
            return answer
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        answer = self.faults().get("rcpt")
        if answer:
            return answer
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        faults = self.faults()
        end = faults.get("data_end", "")
        if end[:1].isdigit():
            return end
        if end == "drop_unstored":
            server.transport.abort()
            return "250 never heard"
        name = self._store(envelope)
        if end == "drop":
            # Aborted, not closed: a closing transport would still write the answer below.
            server.transport.abort()
            return "250 never heard"
        if end == "hold" and faults.get("hold_message", int(name)) == int(name):
            deadline = time.monotonic() + float(faults.get("hold_seconds", 120))
            while not (self.directory / "release").exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        await asyncio.sleep(float(faults.get("data_delay", 0)))
        return f"250 OK queued as {name}"

    def _store(self, envelope) -> str:
        with self._lock:
            number = len(list(self.mailbox.glob("*.eml"))) + 1
            name = f"{number:05d}"
            aside = self.mailbox / f".{name}.tmp"
            aside.write_bytes(
                b"X-Envelope-From: "
                + envelope.mail_from.encode()
                + b"\r\nX-Envelope-To: "
                + ",".join(envelope.rcpt_tos).encode()
                + b"\r\n"
                + envelope.original_content
            )
            os.replace(aside, self.mailbox / f"{name}.eml")
        return name


def _authenticator(user: str, password: str):
    def check(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == user
            and auth_data.password.decode() == password
        )
        return AuthResult(success=ok, handled=False)

    return check


def serve(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("directory", type=Path)
    parser.add_argument("fd", type=int, help="the inherited socket to listen on")
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--implicit-tls", action="store_true")
    args = parser.parse_args(argv)
    # The socket handed down by the parent (tests/processes.py).
    options: dict = {"sock": socket.socket(fileno=args.fd)}
    if args.user:
        options.update(
            auth_required=True,
            auth_require_tls=False,
            authenticator=_authenticator(args.user, args.password),
        )
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        options["ssl_context" if args.implicit_tls else "tls_context"] = context
    controller = SocketController(FaultyMailbox(args.directory), ready_timeout=120, **options)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    controller.start()
    print("listening", flush=True)
    stopped.wait()
    controller.stop()


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and its key): the CA file a client trusts is the cert."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class SmtpServer:
    """The server process as a test sees it."""

    def __init__(
        self,
        directory: Path,
        *,
        user: str = "",
        password: str = "",
        tls=None,
        port: KernelPort | None = None,
    ):
        """`port`: the port a server stopped with `keep_port` held, to bring it back there (by default a
        port the kernel chooses)."""
        self.directory = directory
        self.mailbox = directory / "mailbox"
        self.held = port or KernelPort()
        self.port = self.held.port
        args = [sys.executable, "-m", __name__, str(directory), "{fd}"]
        if user:
            args += ["--user", user, "--password", password]
        if tls is not None:
            cert, key, implicit = tls
            args += ["--cert", str(cert), "--key", str(key)] + (
                ["--implicit-tls"] if implicit else []
            )
        self.log_path = directory / "server.log"
        directory.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = popen_listening(
                lambda fd: [str(fd) if arg == "{fd}" else arg for arg in args],
                self.held,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()
            if "listening" in self.log_path.read_text():
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", self.port), timeout=1),
                ):
                    return
            time.sleep(0.05)
        raise RuntimeError("SMTP server did not start:\n" + self.log_path.read_text()[-3000:])

    def faults(self, **faults) -> None:
        """Switch the faults (none: every command answered as a healthy server does)."""
        aside = self.directory / ".faults.tmp"
        aside.write_text(json.dumps(faults))
        os.replace(aside, self.directory / "faults.json")

    def release(self) -> None:
        """A held answer after DATA goes out now."""
        (self.directory / "release").touch()

    def messages(self) -> list[Message]:
        return [
            email.message_from_bytes(path.read_bytes())
            for path in sorted(self.mailbox.glob("*.eml"))
        ]

    def message_ids(self) -> list[str]:
        return [message["Message-ID"] for message in self.messages()]

    def wait_for_messages(self, count: int, timeout: float = 120) -> list[Message]:
        deadline = time.monotonic() + timeout
        while len(messages := self.messages()) < count:
            assert time.monotonic() < deadline, f"{len(messages)} messages, {count} expected"
            time.sleep(0.05)
        return messages

    def stop(self, *, keep_port: bool = False) -> None:
        """Stop the process; `keep_port`: hold its port (connections refused) for a server started on it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not keep_port:
            self.held.close()


if __name__ == "__main__":
    serve(sys.argv[1:])
