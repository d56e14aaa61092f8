"""The receiving application's own records. This app imports nothing from the rest of the product."""

import uuid

from django.db import models


class TaskStatus(models.TextChoices):
    OPEN = "open", "Open"
    IN_PROGRESS = "in_progress", "In progress"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


# Every allowed move of a task's status, set by the people doing the task: forward only. Done and failed
# are final, so the sender's "work done?" answer never goes back.
TASK_STATUS_TRANSITIONS: dict[str, frozenset[str]] = {
    TaskStatus.OPEN: frozenset({TaskStatus.IN_PROGRESS, TaskStatus.DONE, TaskStatus.FAILED}),
    TaskStatus.IN_PROGRESS: frozenset({TaskStatus.DONE, TaskStatus.FAILED}),
    TaskStatus.DONE: frozenset(),
    TaskStatus.FAILED: frozenset(),
}


class ReceiverTask(models.Model):
    task_id = models.UUIDField(default=uuid.uuid4, editable=False)
    # The identity of one approved business action: non-null and unique, so a repeated
    # delivery can only ever find the task it created the first time.
    action_key = models.CharField(max_length=200, null=False, blank=False)
    payload = models.JSONField()
    payload_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=TaskStatus.choices, default=TaskStatus.OPEN)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["action_key"], name="receiver_task_unique_action_key"),
            models.UniqueConstraint(fields=["task_id"], name="receiver_task_unique_task_id"),
            models.CheckConstraint(
                condition=~models.Q(action_key=""), name="receiver_task_action_key_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return f"task {self.task_id} for {self.action_key}"


class TaskEventKind(models.TextChoices):
    STATUS_CHANGED = "task.status_changed", "Status changed"
    DELETED = "task.deleted", "Deleted"


class TaskEvent(models.Model):
    """What the receiver tells the sender about a task after creating it: its work status moved, or the task
    was deleted. Written in the transaction of the change (so a committed change always has its event) and
    sent afterwards (`delivery.status_events`); the row's id is the event's sequence, growing per task in
    the order of the changes, so the sender keeps the newest whatever order the events arrive in."""

    # The webhook-id of every sending of this event: the sender drops a repeat by it.
    event_id = models.UUIDField(default=uuid.uuid4, editable=False, unique=True)
    action_key = models.CharField(max_length=200)
    task_id = models.UUIDField()
    payload_hash = models.CharField(max_length=64)
    kind = models.CharField(max_length=32, choices=TaskEventKind.choices)
    status = models.CharField(max_length=16, blank=True)
    occurred_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["id"], name="task_event_unsent_idx", condition=models.Q(sent_at=None)
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.action_key} (#{self.pk})"


class SeenMessage(models.Model):
    """Signed message ids already accepted, so that a replayed request is refused."""

    message_id = models.CharField(max_length=120)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message_id"], name="seen_message_unique_id")
        ]
        indexes = [models.Index(fields=["received_at"], name="seen_message_age_idx")]

    def __str__(self) -> str:
        return self.message_id


class FiredFault(models.Model):
    """A demo or test fault that has fired for an action key. A table, not process memory, so that every
    worker of the receiver sees it: the unique row is claimed by an INSERT, and only one claim wins."""

    action_key = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)
    fired_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["action_key", "kind"], name="fired_fault_unique_key_kind"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} for {self.action_key}"


class AccountRequestState(models.TextChoices):
    PROCESSING = "processing", "Processing"
    DONE = "done", "Done"


class Account(models.Model):
    """An account of the bundled accounts service, a second receiving system that speaks the IETF
    Idempotency-Key draft (the demo's `provision_account`): one account per key, the key unique and
    non-null. A request is recorded as processing before its work and done after it, so a request with
    the same key meanwhile is told the first one is still in progress (409)."""

    account_id = models.CharField(max_length=40)
    idempotency_key = models.CharField(max_length=200)
    payload = models.JSONField()
    fingerprint = models.CharField(max_length=64)
    state = models.CharField(
        max_length=12, choices=AccountRequestState.choices, default=AccountRequestState.PROCESSING
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["idempotency_key"], name="account_unique_key"),
            models.UniqueConstraint(fields=["account_id"], name="account_unique_id"),
            models.CheckConstraint(
                condition=~models.Q(idempotency_key=""), name="account_key_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return f"account {self.account_id} for {self.idempotency_key}"
