"""The fault run's kinds beyond the receiver's own faults (`tests/oracle/test_fault_run.py`): each a move of
the run's schedule, made through the product's own paths, that says whether it had an effect (so that a short
run can show it covered every kind). Status events the receiver sends over HTTP to the console's signed
endpoint; work status pulled from an accounts API; the receiver down (its process stopped, its port held) and
back; an operator's retries, cancels and compensations, as the console's actions make them."""

import contextlib
import random
import time

from django.db import transaction

from approvals.services import request_approve
from delivery.errors import TaskNotFound
from delivery.models import ReceiverTask, TaskEvent
from delivery.services import task_delete, task_status_set
from outbox.errors import OutboxError
from outbox.models import Handoff, HandoffState, StatusEvent
from outbox.services.compensation import instance_compensate
from outbox.services.destination_configs import destination_configs_apply
from outbox.services.operator import handoff_cancel, handoff_retry
from outbox.services.work_pull import handoffs_pull_work_status
from tests.builders import record
from tests.factories import ONBOARDING_PAYLOAD, make_request

S = HandoffState
EVENTS_PATH = "/reconciliation/api/destinations/receiver/status-events"
ACCOUNTS = "oracle-accounts"
ACCOUNTS_TOKEN = "oracle-accounts-token"
ACCOUNTS_TOKEN_ENV = "HANDOFF_DEST_ORACLE_ACCOUNTS_TOKEN"
# How long a work pull waits for an accounts handoff to be delivered (through the run's 40 % faults).
WORK_PULL_SECONDS = 120


def accounts_document(base_url: str) -> dict:
    """The accounts API the receiver's process serves, as a destination whose work status is pulled."""
    return {
        "destinations": [
            {
                "name": ACCOUNTS,
                "kind": "idempotency_key_http",
                "url": f"{base_url}/delivery/accounts",
                "auth": {"scheme": "bearer", "token_env": ACCOUNTS_TOKEN_ENV},
                "create": {"method": "POST", "path": "/v1/accounts"},
                "receipt": {"id": "account.id"},
                "work_status": {
                    "source": "pulled",
                    "read": {"method": "GET", "path": "/v1/accounts/{receipt_id}"},
                    "field": "account.status",
                    "done": ["active"],
                    "failed": ["closed", "failed"],
                    "open": ["pending"],
                    "every_seconds": 5,
                },
            }
        ]
    }


class Kinds:
    """The moves; each returns True when it changed something (a status recorded, a handoff moved)."""

    def __init__(self, run):
        self.run, self.rng = run, run.rng
        self.receiver_down_port: int | None = None
        self.accounts_number = 900

    # --- the receiver's side ----------------------------------------------------------------

    def base_url(self) -> str:
        return self.run.procs.receiver_url.removesuffix("/delivery/api")

    def status_events(self) -> bool:
        """The receiver's unsent events (work moved, tasks deleted), sent to the console's signed endpoint."""
        unsent = TaskEvent.objects.filter(sent_at__isnull=True).count()
        before = StatusEvent.objects.count()
        self.run.procs.manage(
            "send_status_events", RECEIVER_STATUS_EVENTS_URL=f"{self.base_url()}{EVENTS_PATH}"
        )
        return unsent > 0 and StatusEvent.objects.count() > before

    def move_the_work(self) -> bool:
        tasks = list(ReceiverTask.objects.values_list("action_key", "status"))
        onward = {"open": ["in_progress", "done", "failed"], "in_progress": ["done", "failed"]}
        movable = [(key, status) for key, status in tasks if status in onward]
        if not movable:
            return False
        key, status = self.rng.choice(movable)
        task_status_set(action_key=key, status=self.rng.choice(onward[status]))
        return True

    def delete_a_task(self) -> bool:
        delivered = self.run.delivered()
        if not delivered:
            return False
        with contextlib.suppress(TaskNotFound):
            task_delete(action_key=self.rng.choice(delivered).action_key)
            return True
        return False

    def work_pull(self) -> bool:
        """A handoff sent to the pulled accounts API, and the pull of the work of those delivered: pulled
        again until one has been (the receiver's process serves the accounts API, so an outage in force
        ends first). Pulled once at once, on a loaded machine the new handoff was never delivered yet, and
        make test's seed 37 ended with this kind never having had an effect."""
        self.receiver_up()
        self.accounts_number += 1
        with transaction.atomic():  # no dispatcher sees it before it names the accounts API
            handoff = record(self.accounts_number)
            Handoff.objects.filter(pk=handoff.pk).update(destination=ACCOUNTS)
        deadline = time.monotonic() + WORK_PULL_SECONDS
        while handoffs_pull_work_status().read == 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(1.0)
        return True

    def outage(self) -> bool:
        """The receiver's process stopped (connections refused on its held port); the next move brings it
        back on the same port."""
        if self.receiver_down_port is not None:
            return self.receiver_up()
        self.receiver_down_port = self.run.procs.stop_receiver()
        return True

    def receiver_up(self) -> bool:
        if self.receiver_down_port is None:
            return False
        port, self.receiver_down_port = self.receiver_down_port, None
        self.run.procs.start_receiver(faults=self.run.faults, port=port)
        return True

    # --- an operator's actions ---------------------------------------------------------------

    def operator(self):
        return self.run.world["olga"]

    def retry(self) -> bool:
        """A step for a person (or one whose outcome is unknown) sent again with its key. When there is
        none yet, a request whose step 3 the receiver refuses for good is approved, so that a later retry
        finds one: a run's schedule may otherwise repair or settle every stuck step first."""
        stuck = list(
            Handoff.objects.filter(
                state__in=(S.NEEDS_ATTENTION, S.UNCERTAIN), kind="action", erasure_id__isnull=True
            ).order_by("pk")
        )
        self.rng.shuffle(stuck)
        for handoff in stuck[:5]:
            with contextlib.suppress(OutboxError):
                handoff_retry(
                    handoff_id=handoff.pk,
                    actor=self.operator(),
                    reason="retried by the oracle's operator",
                    confirm_risk=True,
                )
                return True
        self.run.number += 1
        approve_without_contact(self.run.world, self.run.number)
        return False

    def cancel(self) -> bool:
        """A first step not sent yet (or stuck) cancelled; else a new request's, cancelled in the transaction
        that approves it. A dispatcher claims a new step within milliseconds: picked after the approval's
        commit, it was in flight by the cancel on a loaded machine, every time for four minutes (seed 37)."""
        rows = Handoff.objects.filter(
            state__in=(S.PENDING, S.NEEDS_ATTENTION), kind="action", step_index=0
        )
        candidates = [h for h in rows.order_by("pk") if h.cancellable_alone]
        self.rng.shuffle(candidates)
        for handoff in candidates[:5]:
            with contextlib.suppress(OutboxError):
                self._cancel(handoff)
                return True
        with contextlib.suppress(OutboxError), transaction.atomic():
            self._cancel(self.run.approve_one())
            return True
        return False

    def _cancel(self, handoff: Handoff) -> None:
        handoff_cancel(
            handoff_id=handoff.pk,
            actor=self.operator(),
            reason="cancelled by the oracle's operator",
        )

    def compensate(self) -> bool:
        """A workflow instance with a delivered step reversed (its steps not sent yet cancelled)."""
        keys = sorted(
            set(
                Handoff.objects.filter(state=S.DELIVERED, kind="action", compensation_state="")
                .exclude(instance_key="")
                .values_list("instance_key", flat=True)
            )
        )
        self.rng.shuffle(keys)
        for key in keys[:5]:
            with contextlib.suppress(OutboxError):
                instance_compensate(
                    instance_key=key, actor=self.operator(), reason="reversed by the oracle"
                )
                return True
        return False


def approve_without_contact(world, number: int) -> None:
    """A request whose step 3 the receiver refuses for good (no contact e-mail): a step for a person."""
    payload = {k: v for k, v in ONBOARDING_PAYLOAD.items() if k != "contact_email"}
    request = make_request(world["w7"], number, world["bob"], payload=payload)
    request_approve(
        workspace_id=7,
        number=number,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )


def seeded_order(rng: random.Random, names: list[str]) -> list[str]:
    order = list(names)
    rng.shuffle(order)
    return order


def configure_accounts(base_url: str) -> None:
    destination_configs_apply(document=accounts_document(base_url), actor_label="oracle fault run")
