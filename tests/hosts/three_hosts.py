"""Three destinations, the web app and the people who use it, each on a host of its own (tests/hosts/harness.py):

- `receiver`: the bundled receiver (kind `http`, destination `crm`), as the harness starts it;
- `ledger`: the accounts API on the Idempotency-Key draft (kind `idempotency_key_http`, destination
  `accounts`; tests/outbox/destinations/idempotency_key_server.py), with its fault switches (a bearer token
  it requires: a wrong one answers 401 to every call);
- `mail`: the SMTP server (kind `smtp`, destination `welcome-mail`; tests/outbox/destinations/smtp_server.py),
  behind a relay (tests/hosts/relay.py) that plays the SMTP link's faults: delay, drop, reset;
- `web`: the web app under gunicorn (the console), on the run's databases over TCP;
- `desk`: a requester and an approver (tests/hosts/desk.py) submitting and approving onboarding requests
  through the web app's forms, one after another: the three-step onboarding routes its steps to the three
  destinations, so every handoff of a run is made by an approval, none inserted.

These are the destinations of tests/faults/test_three_destinations_kills.py (tests/acceptance/
three_destinations.py's document), pointed at the hosts' addresses.
"""

import email
import json
import subprocess
import sys
import time
from pathlib import Path

from tests.acceptance.three_destinations import (
    ACCOUNTS,
    ACCOUNTS_TOKEN,
    ACCOUNTS_TOKEN_ENV,
    MAIL,
    destinations_document,
)
from tests.hosts.harness import http_call_command

LEDGER_PORT = 8100
SMTP_PORT = 2525
# The SMTP server's own port on the mail host; the relay in front of it listens on SMTP_PORT.
SMTP_INNER_PORT = 2526
WEB_PORT = 8000
START_DEADLINE = 120.0
STEPS = ("create_client", "provision_account", "send_welcome_pack")
# The desk's pause between two approvals: about one request a second, three handoffs each.
DESK_PAUSE = "0.5"
WORLD = """
import json
from django.test import Client
from outbox.services.destination_configs import destination_configs_apply
from tests.acceptance.three_destinations import publish_routed_onboarding
from tests.factories import onboarding_world
world = onboarding_world()
destination_configs_apply(document=json.loads({document!r}), actor_label="manage.py destinations")
publish_routed_onboarding(actor=None)
sessions = {{}}
for name in ("bob", "alice"):
    client = Client()
    client.force_login(world[name])
    sessions[name] = client.cookies["sessionid"].value
print(json.dumps(sessions))
"""


class ThreeHosts:
    """The ledger, the SMTP server, the web app and the desk of one run (`Run`), started in that order."""

    def __init__(self, run):
        self.run, self.net = run, run.network
        self.mail_dir = run.tmp_path / "smtp"
        self.mail_dir.mkdir()
        self.ledger_url = f"http://{self.net['ledger'].address}:{LEDGER_PORT}"
        self.web_url = f"http://{self.net['web'].address}:{WEB_PORT}"
        self.approved_file = run.tmp_path / "approved.txt"
        self.stop_file = run.tmp_path / "desk-stop"

    def env(self) -> dict[str, str]:
        """What each dispatcher needs beside the harness's: the accounts API's token."""
        return {ACCOUNTS_TOKEN_ENV: ACCOUNTS_TOKEN}

    def start(self) -> None:
        """The destinations up and applied, the onboarding routed over them, the web app up, the desk at
        work (the receiver is started by the harness first)."""
        env = {**self.run.base_env(), "LEDGER_SERVER_TOKEN": ACCOUNTS_TOKEN}
        self.run.spawn(
            "ledger", "ledger",
            [sys.executable, "-m", "tests.hosts.listen", str(LEDGER_PORT), sys.executable, "-m",
             "tests.outbox.destinations.idempotency_key_server", "--fd", "{fd}"],
            env,
        )  # fmt: skip
        self.run.spawn(
            "mail", "mail",
            [sys.executable, "-m", "tests.hosts.listen", str(SMTP_INNER_PORT), sys.executable, "-m",
             "tests.outbox.destinations.smtp_server", str(self.mail_dir), "{fd}"],
            env,
        )  # fmt: skip
        # The one way in from the other hosts: the relay whose delay, drops and resets the schedule plays.
        control = self.run.tmp_path / "mail-relay"
        control.write_text("0\n")
        self.net.relays["mail"] = control
        self.run.spawn(
            "mail-relay", "mail",
            [sys.executable, "-m", "tests.hosts.relay", f"{self.net['mail'].address}:{SMTP_PORT}",
             f"127.0.0.1:{SMTP_INNER_PORT}", str(control)],
            env,
        )  # fmt: skip
        self._wait(lambda: self.ledger_state() is not None, "the ledger")
        document = destinations_document(
            receiver_url=self.run.receiver_url, ledger_url=self.ledger_url, smtp_port=SMTP_PORT
        )
        for destination in document["destinations"]:
            if destination["name"] == MAIL:
                destination["host"] = self.net["mail"].address
        out = self.run.manage("shell", "-c", WORLD.format(document=json.dumps(document)))
        self.sessions = json.loads(out.strip().splitlines()[-1])
        self._start_web()
        self.run.spawn(
            "desk", "desk",
            [sys.executable, "-m", "tests.hosts.desk", self.web_url, self.sessions["bob"],
             self.sessions["alice"], str(self.approved_file), str(self.stop_file), DESK_PAUSE],
            self.run.base_env(),
        )  # fmt: skip

    def _start_web(self) -> None:
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        env = {
            **self.run.base_env(),
            "DJANGO_ALLOWED_HOSTS": f"{self.net['web'].address},127.0.0.1,localhost",
        }
        self.run.spawn(
            "web", "web",
            [gunicorn, "config.wsgi", "--bind", f"{self.net['web'].address}:{WEB_PORT}", "--workers",
             "1", "--worker-class", "gthread", "--threads", "8", "--timeout", "120"],
            env,
        )  # fmt: skip
        self._wait(lambda: self.ask("GET", f"{self.web_url}/healthz") is not None, "the web app")

    def stop_desk(self) -> None:
        """The desk stops after the request it is on (its approvals are all made once it exits)."""
        self.stop_file.write_text("stop\n")
        desk = self.run.procs.get("desk")
        if desk is not None:
            desk.wait(timeout=120)
            self.run.procs.pop("desk")

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.5)
        logs = "".join(f"\n--- {n} ---\n{self.run.log(n)[-2000:]}" for n in self.run.procs)
        raise RuntimeError(f"{what} did not start:{logs}")

    # Asking the hosts, from a host with no fault of its own (the desk's).

    def ask(self, method: str, url: str, body: dict | None = None) -> dict | None:
        """`method url` with the JSON `body`, from the desk host; the JSON answered, None when nothing
        came back."""
        done = subprocess.run(
            self.net["desk"].command(*http_call_command(method, url, body, timeout=5)),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if done.returncode:
            return None
        return json.loads(done.stdout.strip().splitlines()[-1])

    def ledger_state(self) -> dict | None:
        return self.ask("GET", f"{self.ledger_url}/_test/state")

    def ledger_token(self, token: str) -> None:
        """The token the accounts API requires from now on (another than the senders': each call 401)."""
        if self.ask("POST", f"{self.ledger_url}/_test/faults", {"token": token}) is None:
            raise RuntimeError("the ledger's fault switch did not answer")

    # What the destinations hold.

    def effects(self) -> dict[str, list[str]]:
        """Per action key, the ids of what the ledger and the SMTP server hold for it (an entry's ref, a
        message's Message-ID): one per key at most, each the id its handoff names."""
        held: dict[str, list[str]] = {}
        state = self.ledger_state()
        if state is None:
            raise RuntimeError("the ledger did not answer")
        for entry in state["entries"]:
            held.setdefault(entry["request_key"], []).append(entry["ref"])
        for path in sorted((self.mail_dir / "mailbox").glob("*.eml")):
            message = email.message_from_bytes(path.read_bytes())
            held.setdefault(message["X-Handoff-Action-Key"], []).append(message["Message-ID"])
        return held

    def approved_keys(self) -> list[str]:
        """Every step's key of every approved request (read from the database: an approval whose answer
        the desk lost counts too)."""
        with self.run.connect() as conn:
            rows = conn.execute(
                "SELECT DISTINCT r.workspace_id, r.number, a.revision FROM approvals_approval a "
                "JOIN approvals_request r ON r.id = a.request_id WHERE a.decision = 'approve'"
            ).fetchall()
        return [
            f"onboarding:{ws}:{number}:{revision}:{step}"
            for ws, number, revision in rows
            for step in STEPS
        ]

    def desk_approvals(self) -> int:
        if not self.approved_file.exists():
            return 0
        return len(self.approved_file.read_text().split())


__all__ = ["ACCOUNTS", "MAIL", "ThreeHosts"]
