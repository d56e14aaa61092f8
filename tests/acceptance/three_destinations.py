"""Three destinations on three contracts, as the demo publishes them, each a real server: the bundled
receiver over its signed HTTP API (kind `http`, the live server), a ledger API on the Idempotency-Key draft
(kind `idempotency_key_http`, `tests/outbox/destinations/idempotency_key_server.py`, a process of its own)
and an SMTP server (kind `smtp`, `tests/outbox/destinations/smtp_server.py`, aiosmtpd in a process of its
own). They are DestinationConfig rows written as `manage.py destinations apply` writes them, and the
three-step onboarding's rule version routes each step to one of them. Deliveries are driven by the
dispatcher's own passes (`sweep` without a destination serves every enabled one)."""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

from django.db.models import Q

from approvals.management.commands.demo import ONBOARDING_STEPS, ONBOARDING_THREE_STEPS_SCHEMA
from approvals.services import request_approve, rule_version_publish
from delivery import faults
from delivery.models import ReceiverTask
from outbox.dispatch.dispatcher import sweep
from outbox.models import DestinationHealth, DestinationState, Handoff, HandoffState
from outbox.services.destination_configs import destination_configs_apply
from tests.factories import ONBOARDING_PAYLOAD, make_request
from tests.outbox.destinations.idempotency_key_server import LedgerProcess
from tests.outbox.destinations.smtp_server import SmtpServer

S = HandoffState
CRM, ACCOUNTS, MAIL = "crm", "accounts", "welcome-mail"
STEP_DESTINATIONS = {"create_client": CRM, "provision_account": ACCOUNTS, "send_welcome_pack": MAIL}
ACCOUNTS_TOKEN_ENV = "HANDOFF_DEST_ACCEPTANCE_ACCOUNTS_TOKEN"
ACCOUNTS_TOKEN = "accounts-acceptance-token"
# The receiver is the live server, a thread of this process: an answer "lost after its commit" is one that
# comes later than the sender waits (`delivery/faults.py` sleeps where gunicorn would close the socket).
RECEIVER_READ_TIMEOUT = 2.0
LOST_ANSWER_SECONDS = RECEIVER_READ_TIMEOUT + 0.5
NO_BACKOFF = {"base_delay": 0, "max_delay": 0}


def instance_key(number: int) -> str:
    return f"onboarding:7:{number}:1"


def step_key(number: int, step: str) -> str:
    return f"{instance_key(number)}:{step}"


def destinations_document(*, receiver_url: str, ledger_url: str, smtp_port: int) -> dict:
    """The destinations file of the three, as an operator keeps it under version control."""
    return {
        "destinations": [
            {
                "name": CRM,
                "kind": "http",
                "url": receiver_url,
                "connect_timeout": 1.0,
                "read_timeout": RECEIVER_READ_TIMEOUT,
                "retry": NO_BACKOFF,
            },
            {
                "name": ACCOUNTS,
                "kind": "idempotency_key_http",
                "url": ledger_url,
                "auth": {"scheme": "bearer", "token_env": ACCOUNTS_TOKEN_ENV},
                "create": {"method": "POST", "path": "/v2/ledger/entries"},
                "idempotency_header": "X-Request-Key",
                "receipt": {"id": "entry.ref", "key": "entry.request_key", "payload": "entry.body"},
                "lookup": {
                    "path": "/v2/ledger/entries?request_key={key}",
                    "id": "entries.0.ref",
                    "key": "entries.0.request_key",
                    "payload": "entries.0.body",
                },
                # A compensation removes the entry the create made, under its own key: never a second create.
                "undo": {"method": "DELETE", "path": "/v2/ledger/entries/{receipt_id}"},
                "connect_timeout": 1,
                "read_timeout": 5,
                "retry": NO_BACKOFF,
            },
            {
                "name": MAIL,
                "kind": "smtp",
                "host": "127.0.0.1",
                "port": smtp_port,
                "security": "none",
                "from_address": "welcome@handoff.example",
                "to": "contact_email",
                "subject": "Welcome, $client_name",
                "body": "Hello $client_name,\n\nyour $plan plan is ready.\n",
                "timeout": 5,
                "retry": NO_BACKOFF,
            },
        ]
    }


@dataclass
class ThreeDestinations:
    """The three servers as a test sees them, and what each holds for a key."""

    settings: object
    ledger: LedgerProcess
    mailbox: SmtpServer

    def lose_receiver_answer(self, key: str) -> None:
        """The receiver commits the task of `key`, and its answer never reaches the sender (once)."""
        self.settings.RECEIVER_FAULTS = {
            "keys": {key: "drop_after_commit"},
            "slow_seconds": LOST_ANSWER_SECONDS,
        }

    def receiver_task_ids(self, key: str) -> list[str]:
        tasks = ReceiverTask.objects.using("delivery").filter(action_key=key)
        return [str(task_id) for task_id in tasks.values_list("task_id", flat=True)]

    def receiver_tasks(self, key: str) -> int:
        return len(self.receiver_task_ids(key))

    def ledger_entries(self, key: str) -> list[dict]:
        return [e for e in self.ledger.entries() if e["request_key"] == key]

    def ledger_creates(self, key: str) -> int:
        return sum(1 for request in self.ledger.creates() if request["key"] == key)

    def messages(self, key: str) -> list[Message]:
        return [m for m in self.mailbox.messages() if m["X-Handoff-Action-Key"] == key]


def publish_routed_onboarding(actor) -> None:
    """The three-step onboarding, each step routed to its destination (publishing checks they are served)."""
    rule_version_publish(
        workflow="onboarding",
        schema=ONBOARDING_THREE_STEPS_SCHEMA,
        steps=[
            {**step, "destination": STEP_DESTINATIONS[step["name"]]} for step in ONBOARDING_STEPS
        ],
        actor=actor,
        notes="three steps, three destinations",
    )


@contextlib.contextmanager
def three_destinations(
    *, live_server, settings, monkeypatch, directory: Path
) -> Iterator[ThreeDestinations]:
    """The three servers up, their rows applied, the onboarding routed over them; everything stopped after."""
    faults.reset()
    settings.RECEIVER_FAULTS = None
    monkeypatch.setenv(ACCOUNTS_TOKEN_ENV, ACCOUNTS_TOKEN)
    ledger = LedgerProcess(token=ACCOUNTS_TOKEN)
    mailbox = None
    try:
        mailbox = SmtpServer(directory / "smtp")
        ledger.wait_until_up()
        destination_configs_apply(
            document=destinations_document(
                receiver_url=f"{live_server.url}/delivery/api",
                ledger_url=ledger.url,
                smtp_port=mailbox.port,
            ),
            actor_label="manage.py destinations",
        )
        publish_routed_onboarding(actor=None)
        yield ThreeDestinations(settings=settings, ledger=ledger, mailbox=mailbox)
    finally:
        ledger.stop()
        if mailbox is not None:
            mailbox.stop()
        settings.RECEIVER_FAULTS = None
        faults.reset()


def approve(world, number: int, *, without: tuple[str, ...] = ()) -> Handoff:
    """Request `number` of workspace 7 (the onboarding payload but the fields `without`) submitted by bob
    and approved by alice; its first step's handoff."""
    payload = {name: value for name, value in ONBOARDING_PAYLOAD.items() if name not in without}
    request = make_request(world["w7"], number, world["bob"], payload=payload)
    return request_approve(
        workspace_id=7,
        number=number,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )


def paused_destinations() -> list[str]:
    return sorted(
        DestinationHealth.objects.filter(state=DestinationState.PAUSED).values_list(
            "name", flat=True
        )
    )


def nothing_to_do() -> bool:
    """Nothing due at a destination that takes calls, nothing in flight, no outcome waiting to be settled."""
    busy = Q(state__in=(S.IN_FLIGHT, S.UNCERTAIN)) | Q(
        pk__in=Handoff.objects.due().exclude(destination__in=paused_destinations()).values("pk")
    )
    return not Handoff.objects.filter(busy).exists()


def drive(max_passes: int = 20) -> int:
    """The dispatcher's periodic pass over every enabled destination until nothing is left to do; the
    number of passes it took (bounded: a pass that makes no progress for ever fails the test)."""
    for passes in range(1, max_passes + 1):
        sweep()
        if nothing_to_do():
            return passes
    raise AssertionError(f"still something to do after {max_passes} sweeps")
