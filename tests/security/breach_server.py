"""A stand-in for Have I Been Pwned's Pwned Passwords range API, run as a process of its own.

The contract (haveibeenpwned.com/API/v3#PwnedPasswords): `GET /range/{first 5 hex digits of the SHA-1}` answers
200, text, one `SUFFIX:COUNT` line per breached hash of that prefix (35 upper-case hex digits); with the header
`Add-Padding: true` the answer is padded with random suffixes of count 0. A prefix that is not 5 hex digits is a
400. `GET /stats` says which paths were asked and whether each asked for padding (the tests read it: nothing
but the prefix may leave the console).

Usage: breach_server.py PASSWORDS_FILE (one breached password a line, `password:count`); prints its address.
"""

import hashlib
import json
import re
import secrets
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BREACHED: dict[str, int] = {}
ASKED: list[dict] = []
PREFIX = re.compile(r"^/range/([0-9A-Fa-f]{5})$")


class RangeApi(BaseHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _answer(self, status: int, body: str, content_type: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/stats":
            return self._answer(200, json.dumps({"asked": ASKED}), "application/json")
        padding = self.headers.get("Add-Padding", "").lower() == "true"
        ASKED.append({"path": self.path, "padding": padding})
        match = PREFIX.match(self.path)
        if match is None:
            return self._answer(400, "The hash prefix was not in a valid format")
        prefix = match.group(1).upper()
        lines = [
            f"{digest[5:]}:{count}"
            for digest, count in BREACHED.items()
            if digest.startswith(prefix)
        ]
        if padding:
            lines += [f"{secrets.token_hex(18)[:35].upper()}:0" for _ in range(800)]
        return self._answer(200, "\r\n".join(lines))


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as passwords:
        for line in passwords:
            password, _, count = line.rstrip("\n").rpartition(":")
            digest = hashlib.sha1(password.encode(), usedforsecurity=False).hexdigest().upper()
            BREACHED[digest] = int(count)
    server = ThreadingHTTPServer(("127.0.0.1", 0), RangeApi)
    print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
