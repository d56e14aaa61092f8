"""Demo: report a task's status as the people doing it would (`manage.py task_status <action_key> done`)."""

from django.core.management.base import BaseCommand, CommandError

from delivery.errors import InvalidTaskStatus, TaskNotFound
from delivery.services import SETTABLE_STATUSES, task_status_set
from delivery.status_events import sender_idle

SEND_WAIT_SECONDS = 15


class Command(BaseCommand):
    help = "Move a receiver task's status forward: in_progress, done or failed."

    def add_arguments(self, parser):
        parser.add_argument("action_key")
        parser.add_argument("status", choices=[str(s) for s in SETTABLE_STATUSES])

    def handle(self, *args, action_key: str, status: str, **options):
        try:
            change = task_status_set(action_key=action_key, status=status)
        except TaskNotFound as exc:
            raise CommandError(f"no task has the action key {action_key}") from exc
        except InvalidTaskStatus as exc:
            raise CommandError(exc.detail) from exc
        # The status event goes from this process's sender thread: wait for it before the process ends.
        sender_idle(timeout=SEND_WAIT_SECONDS)
        if change.changed:
            self.stdout.write(f"{action_key}: {change.previous_status} -> {change.task.status}")
        else:
            self.stdout.write(f"{action_key}: already {change.task.status}")
