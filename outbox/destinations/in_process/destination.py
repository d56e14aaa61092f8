"""The in-process kind: the receiver's services called directly, for the fast tests and the embedded demo.

The one module of the source apps that imports the receiver's code (an import-linter contract says so):
everything else reaches the receiver through a destination.
"""

from dataclasses import dataclass, field

from delivery import services
from delivery.errors import ActionKeyConflict, InvalidTaskPayload, TaskNotFound
from outbox.destinations.base import Destination, RemoteTask, remote_task
from outbox.failures import DeliveryResult, MalformedReceipt, Outgoing, validate_receipt
from outbox.models import FailureClass
from outbox.retry import RetryPolicy

CONFIG_KEYS = {"name", "retry", "supports_idempotency", "supports_lookup", "lookup_batch_size"}


@dataclass
class InProcessDestination(Destination):
    """Calls the receiver's services directly. For fast tests and the embedded demo only.

    `lose_ack_for` names action keys whose acknowledgement is lost once after the receiver has
    committed: the fault the acceptance scenario injects.
    """

    lose_ack_for: set[str] = field(default_factory=set)
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    name: str = "receiver"
    supports_idempotency: bool = True
    supports_lookup: bool = True
    # The receiver takes a compensating operation as a task of its own key.
    undo: str = "native"
    # Above 1: `lookup_many` answers that many keys in one call, as the http kind's POST /tasks/lookup does.
    lookup_batch_size: int = 0

    @classmethod
    def from_config(cls, config: dict) -> "InProcessDestination":
        if unknown := sorted(set(config) - CONFIG_KEYS):
            raise ValueError(
                f"unknown configuration key(s) for the in_process kind: {', '.join(unknown)}"
            )
        return cls(
            retry_policy=RetryPolicy.from_config(config.get("retry")),
            name=config.get("name", "receiver"),
            supports_idempotency=config.get("supports_idempotency", True),
            supports_lookup=config.get("supports_lookup", True),
            lookup_batch_size=config.get("lookup_batch_size", 0),
        )

    def describe(self) -> str:
        return f"{self.name} (in process)"

    def deliver(self, outgoing: Outgoing) -> DeliveryResult:
        try:
            outcome = services.task_create_idempotent(
                action_key=outgoing.action_key, payload=outgoing.payload
            )
        except ActionKeyConflict as exc:
            return DeliveryResult.failed(
                FailureClass.CONFLICT, "key_conflict", str(exc), status_code=409
            )
        except InvalidTaskPayload as exc:
            return DeliveryResult.failed(
                FailureClass.PERMANENT, "payload_invalid", str(exc), status_code=422
            )
        if outgoing.action_key in self.lose_ack_for:
            self.lose_ack_for.discard(outgoing.action_key)
            return DeliveryResult.failed(
                FailureClass.UNCERTAIN,
                "response_lost",
                "acknowledgement lost after the receiver committed",
            )
        receipt = services.task_as_receipt(outcome)
        try:
            task_id, created = validate_receipt(receipt, outgoing)
        except MalformedReceipt as exc:
            return DeliveryResult.failed(FailureClass.MALFORMED, "malformed_receipt", str(exc))
        return DeliveryResult.ok(
            task_id=task_id, created=created, status_code=201 if created else 200, receipt=receipt
        )

    def lookup(self, action_key: str) -> RemoteTask | None:
        try:
            task = services.task_get(action_key=action_key)
        except TaskNotFound:
            return None
        return RemoteTask(
            action_key=task.action_key,
            task_id=str(task.task_id),
            payload_hash=task.payload_hash,
            status=task.status,
        )

    def lookup_many(self, action_keys: list[str]) -> dict[str, RemoteTask | None]:
        if self.lookup_batch_size < 2:
            return super().lookup_many(action_keys)
        found = {
            task.action_key: task
            for task in map(remote_task, services.task_find_many(action_keys=action_keys))
        }
        return {action_key: found.get(action_key) for action_key in action_keys}

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        return [remote_task(item) for item in services.task_list_keys(after=after, limit=limit)]
