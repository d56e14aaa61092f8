"""`manage.py demo_mailbox`: the demo's SMTP server (127.0.0.1, DEMO_SMTP_PORT; 0 for a port the kernel
chooses; DEMO_SMTP_FD: a socket bound already, handed down, to listen on instead), storing every message in
DEMO_MAILBOX_DIR for the mailbox page. It prints its address once it listens, and runs until stopped
(SIGTERM or Ctrl-C)."""

import os
import signal
import threading
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from delivery.mailbox_server import mailbox_server


class Command(BaseCommand):
    help = "Run the demo's SMTP server, keeping each message for the mailbox page."

    def handle(self, *args, **options):
        if not settings.DEMO_MAILBOX_DIR:
            raise CommandError(
                "DEMO_MAILBOX_DIR is not set: the mailbox has nowhere to keep messages"
            )
        fd = os.environ.get("DEMO_SMTP_FD", "")
        server = mailbox_server(
            Path(settings.DEMO_MAILBOX_DIR),
            port=settings.DEMO_SMTP_PORT,
            fd=int(fd) if fd.isdigit() else None,
        )
        stopped = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopped.set())
        server.start()
        self.stdout.write(f"demo mailbox: smtp://127.0.0.1:{server.port}", ending="\n")
        self.stdout.flush()
        stopped.wait()
        server.stop()
