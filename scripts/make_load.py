"""A load of other people's work on this machine, to check that `make test` passes under it.

    python3 scripts/make_load.py [--load 10] [--servers 3] [--seconds 3600]

Starts CPU burners and a few HTTP servers, each bound to a port of the kernel's ephemeral range and hit by
a client of its own that opens a new connection for every request (so ports are taken and let go all the
time, as on a machine shared with other test runs), and restarts each server on a new port every few
seconds. Together they keep about `--load` processes runnable. It prints the load average every 30 s and
stops everything after `--seconds`, on Ctrl-C, or on `kill <pid>` (the pid it prints first). Run it in one
terminal and `make test` in another (README.md, "Tests").
"""

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

BURNER = "while True:\n    pass\n"

# One server and its client in one process pair: the server binds port 0 (the kernel's choice), serves for a
# few seconds, and is replaced by another on a new port; the client asks whichever server is current.
SERVER_AND_CLIENT = """
import http.client, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Answer(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"busy elsewhere"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

current = {}

def serve():
    while True:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        server.daemon_threads = True
        current["port"] = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        time.sleep(5)
        server.shutdown()
        server.server_close()

threading.Thread(target=serve, daemon=True).start()
while "port" not in current:
    time.sleep(0.01)
while True:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", current["port"], timeout=2)
        connection.request("GET", "/")
        connection.getresponse().read()
        connection.close()
    except OSError:
        pass
"""


def _end_with_parent() -> None:
    """In the child: Linux sends it SIGTERM when this script ends, even by SIGKILL (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, default=10, help="processes kept runnable (default 10)")
    parser.add_argument(
        "--servers", type=int, default=3, help="servers on ephemeral ports (default 3)"
    )
    parser.add_argument("--seconds", type=float, default=3600, help="how long (default 3600)")
    args = parser.parse_args()

    # A server and its client keep about two processes busy; burners make up the rest.
    burners = max(0, args.load - 2 * args.servers)
    # This interpreter running this file's own code: nothing from outside reaches the command lines.
    programs = [SERVER_AND_CLIENT] * args.servers + [BURNER] * burners
    children = [
        subprocess.Popen([sys.executable, "-c", code], preexec_fn=_end_with_parent)  # noqa: S603
        for code in programs
    ]

    def stop(*_) -> None:
        for child in children:
            child.terminate()
        for child in children:
            child.wait()
        print("load stopped", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(
        f"pid {os.getpid()}: {burners} CPU burners and {args.servers} servers on ephemeral ports for"
        f" {args.seconds:.0f} s; stop with Ctrl-C or `kill {os.getpid()}`",
        flush=True,
    )
    ends = time.monotonic() + args.seconds
    while (left := ends - time.monotonic()) > 0:
        time.sleep(min(30, left))
        one, five, _ = os.getloadavg()
        print(f"load average {one:.1f} (5 min: {five:.1f})", flush=True)
    stop()


if __name__ == "__main__":
    main()
