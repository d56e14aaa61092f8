"""`manage.py demo_alert_sink`: the demo's receiver of alerts (127.0.0.1, DEMO_ALERT_PORT): it keeps every
notification the demo's alert channels send (`demo_alert_channels`) in DEMO_ALERT_DIR, one JSON line each
with its path, notification id and body, answers 202, and lists what it received at `/`, newest first, so a
newcomer sees what a pager would have got. Runs until stopped (SIGTERM or Ctrl-C). Not for production: it
checks no signature and keeps everything."""

import html
import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

MAX_BODY = 256 * 1024


def _handler(received: Path, lock: threading.Lock):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the name http.server calls
            length = int(self.headers.get("Content-Length", "0"))
            if length > MAX_BODY:
                self.send_error(413)
                return
            body = self.rfile.read(length).decode("utf-8", "replace")
            line = {
                "path": self.path,
                "id": self.headers.get("webhook-id")
                or self.headers.get("X-Handoff-Notification-Id", ""),
                "body": body,
            }
            with lock, received.open("a") as out:
                out.write(json.dumps(line) + "\n")
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):  # noqa: N802
            lines = received.read_text().splitlines() if received.exists() else []
            items = "".join(
                f"<li><code>{html.escape(d['path'])}</code> · <code>{html.escape(d['id'])}</code>"
                f"<pre>{html.escape(d['body'])}</pre></li>"
                for d in map(json.loads, reversed(lines[-200:]))
            )
            page = (
                "<!doctype html><meta charset=utf-8><title>Demo alert sink</title>"
                f"<h1>Notifications received ({len(lines)})</h1><ol>{items}</ol>"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    return Handler


class Command(BaseCommand):
    help = "Run the demo's receiver of alerts, keeping each notification for its page."

    def handle(self, *args, **options):
        port = os.environ.get("DEMO_ALERT_PORT", "")
        folder = os.environ.get("DEMO_ALERT_DIR", "")
        if not port.isdigit() or not folder:
            raise CommandError("DEMO_ALERT_PORT and DEMO_ALERT_DIR must be set")
        Path(folder).mkdir(parents=True, exist_ok=True)
        handler = _handler(Path(folder) / "received.jsonl", threading.Lock())
        server = ThreadingHTTPServer(("127.0.0.1", int(port)), handler)
        stopped = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopped.set())
        threading.Thread(target=server.serve_forever, daemon=True).start()
        # The port it listens on: DEMO_ALERT_PORT, or the kernel's choice for 0.
        self.stdout.write(
            f"demo alert sink: http://127.0.0.1:{server.server_address[1]}/", ending="\n"
        )
        self.stdout.flush()
        stopped.wait()
        server.shutdown()
        server.server_close()
