"""Demo: delete a receiver task as its people might (`manage.py task_delete <action_key>`); the sender is told."""

from django.core.management.base import BaseCommand, CommandError

from delivery.errors import TaskNotFound
from delivery.services import task_delete
from delivery.status_events import sender_idle

SEND_WAIT_SECONDS = 15


class Command(BaseCommand):
    help = "Delete a receiver task; a signed status event tells the sender (RECEIVER_STATUS_EVENTS_URL)."

    def add_arguments(self, parser):
        parser.add_argument("action_key")

    def handle(self, *args, action_key: str, **options):
        try:
            task = task_delete(action_key=action_key)
        except TaskNotFound as exc:
            raise CommandError(f"no task has the action key {action_key}") from exc
        # The status event goes from this process's sender thread: wait for it before the process ends.
        sender_idle(timeout=SEND_WAIT_SECONDS)
        self.stdout.write(f"{action_key}: task {task.task_id} deleted")
