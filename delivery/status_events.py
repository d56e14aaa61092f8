"""The receiver tells the sender when a task's work changes or the task is deleted: a signed status event.

Each change writes a `TaskEvent` row in its own transaction (`task_event_record`), so a committed change
always has its event; the event is sent after the commit, by a thread of the process that made the change
(`wake_sender_on_commit`), and again by `manage.py send_status_events` for any a failure left unsent.
The sender (our source application) deduplicates by the event's webhook-id, which stays the same on every
resend, and keeps the newest by `sequence`, so a resend or a late event changes nothing.

Signed in the Standard Webhooks format with RECEIVER_EVENTS_SIGNING_SECRET. Without
RECEIVER_STATUS_EVENTS_URL nothing is sent: a receiver that cannot send events, for which the sender's
periodic reconciliation is the only source of news.
"""

from __future__ import annotations

import json
import logging
import threading
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from delivery.models import ReceiverTask, TaskEvent, TaskEventKind

# httpx (about 0.02 s of CPU to import) is imported when an event is sent: every process of the product imports
# this module through the in-process destination, and only a receiver with RECEIVER_STATUS_EVENTS_URL sends.
if TYPE_CHECKING:
    import httpx

DB = "delivery"
logger = logging.getLogger(__name__)
LINGER_SECONDS = 2.0
REFUSED_FOR_GOOD = frozenset({400, 404, 413, 415, 422})


def task_event_record(task: ReceiverTask, kind: str) -> TaskEvent:
    """Write the event of a change to `task` inside the change's transaction; it is sent after the commit."""
    event = TaskEvent.objects.using(DB).create(
        action_key=task.action_key,
        task_id=task.task_id,
        payload_hash=task.payload_hash,
        kind=kind,
        status=task.status if kind == TaskEventKind.STATUS_CHANGED else "",
        occurred_at=timezone.now(),
    )
    wake_sender_on_commit(event.pk)
    return event


def event_document(event: TaskEvent) -> dict:
    """The event's body, in the Standard Webhooks shape (type, timestamp, data)."""
    return {
        "type": event.kind,
        "timestamp": event.occurred_at.isoformat(),
        "data": {
            "action_key": event.action_key,
            "task_id": str(event.task_id),
            "payload_hash": event.payload_hash,
            "status": event.status,
            "sequence": event.pk,
            "occurred_at": event.occurred_at.isoformat(),
        },
    }


def _signed(event: TaskEvent, body: str) -> dict[str, str]:
    secret = settings.RECEIVER_EVENTS_SIGNING_SECRET
    message_id = f"evt_{event.event_id.hex}"
    # A fresh timestamp on each sending (the signature's tolerance is minutes), the same id always.
    now = timezone.now()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, now, body),
        "content-type": "application/json",
    }


class SendResult(NamedTuple):
    sent: int
    failed: int


def _send_one(client: httpx.Client, event: TaskEvent) -> bool:
    import httpx

    body = json.dumps(event_document(event), separators=(",", ":"))
    error = ""
    try:
        answer = client.post(
            settings.RECEIVER_STATUS_EVENTS_URL, content=body, headers=_signed(event, body)
        )
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    else:
        # 2xx: recorded (or a repeat the sender already has). A refusal of the event itself: the sender will
        # never take it as it is, so it is kept with the answer and not sent again by itself. A refused
        # signature (401) is a secret to fix, after which the event is still worth sending: retried.
        if answer.is_success or answer.status_code in REFUSED_FOR_GOOD:
            error = (
                "" if answer.is_success else f"refused: {answer.status_code} {answer.text[:200]}"
            )
            TaskEvent.objects.using(DB).filter(pk=event.pk).update(
                sent_at=timezone.now(), attempts=event.attempts + 1, last_error=error
            )
            return answer.is_success
        error = f"{answer.status_code} {answer.text[:200]}"
    TaskEvent.objects.using(DB).filter(pk=event.pk).update(
        attempts=event.attempts + 1, last_error=error[:300]
    )
    logger.warning("status event %s not sent: %s", event.event_id, error)
    return False


def _client() -> httpx.Client:
    """Building a client builds a TLS context, tens of milliseconds: one per sender thread or sweep, kept
    for its events (and closed with it, so that no connection outlives the thread)."""
    import httpx

    return httpx.Client(timeout=settings.RECEIVER_EVENTS_TIMEOUT_SECONDS, trust_env=False)


def _send(client: httpx.Client, events: list[TaskEvent]) -> tuple[SendResult, set[int]]:
    """Send each event in order; the result and the ids that failed (still due)."""
    failed: set[int] = set()
    for event in events:
        if not _send_one(client, event):
            failed.add(event.pk)
    return SendResult(len(events) - len(failed), len(failed)), failed


def status_events_send_due(*, limit: int = 1000) -> SendResult:
    """Send every unsent event, oldest first (at most `limit`): what a failure or a stopped process left.
    Nothing is sent without RECEIVER_STATUS_EVENTS_URL."""
    if not settings.RECEIVER_STATUS_EVENTS_URL:
        return SendResult(0, 0)
    due = TaskEvent.objects.using(DB).filter(sent_at=None).order_by("id")[:limit]
    with _client() as client:
        return _send(client, list(due))[0]


class _Sender:
    """One thread per process sends the events this process wrote, in order, after their commit; a failed
    one is tried again after a growing pause, up to RECEIVER_EVENTS_MAX_ATTEMPTS sendings. Each process
    sends only its own events, so several web workers never send the same event at once. The thread ends
    when nothing of its own is due."""

    def __init__(self):
        self.lock = threading.Lock()
        self.woken = threading.Event()
        self.due: set[int] = set()
        self.thread: threading.Thread | None = None

    def wake(self, event_id: int) -> None:
        with self.lock:
            self.due.add(event_id)
            self.woken.set()
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="status-events", daemon=True)
                self.thread.start()

    def _take(self) -> tuple[set[int], list[TaskEvent]]:
        """The ids due now, and those of them still unsent with sendings left (others were sent by
        `send_status_events` meanwhile, or ran out of attempts)."""
        with self.lock:
            self.woken.clear()
            ids = set(self.due)
        events = (
            TaskEvent.objects.using(DB)
            .filter(pk__in=ids, sent_at=None, attempts__lt=settings.RECEIVER_EVENTS_MAX_ATTEMPTS)
            .order_by("id")
        )
        return ids, list(events)

    def _pass(self, client: httpx.Client) -> bool:
        """One pass over what is due; True when something failed and stays due."""
        ids, events = self._take()
        _result, failed = _send(client, events)
        with self.lock:
            # Ids handed over during the pass stay due, as do the failed ones.
            self.due -= ids - failed
        return bool(failed)

    def _run(self) -> None:
        pause = 0.5
        client = _client()
        try:
            while True:
                failed = self._pass(client)
                if not failed and not self.due:
                    # Changes come in bursts: wait a little for the next before ending the thread.
                    self.woken.wait(LINGER_SECONDS)
                with self.lock:
                    if not self.due:
                        # Under the lock: a wake-up after this starts a new thread.
                        self.thread = None
                        return
                if failed:
                    self.woken.wait(pause)
                    pause = min(pause * 2, 30.0)
        except Exception:
            logger.exception(
                "the status-event sender stopped; manage.py send_status_events resends"
            )
            with self.lock:
                self.thread = None
        finally:
            # The thread's own connections, never left open for the process (or a test database) to trip on.
            client.close()
            connections[DB].close()


_sender = _Sender()


def wake_sender_on_commit(event_id: int) -> None:
    """After the change commits, hand its event to this process's sender. A hint: a lost wake-up leaves the
    event for `manage.py send_status_events`, and the sender's reconciliation finds the change anyway."""
    if settings.RECEIVER_STATUS_EVENTS_URL:
        transaction.on_commit(partial(_sender.wake, event_id), using=DB)


def sender_idle(timeout: float) -> bool:
    """Wait up to `timeout` seconds for the sender thread to end (tests, shutdown). True when it has."""
    thread = _sender.thread
    if thread is not None:
        thread.join(timeout)
    return _sender.thread is None
