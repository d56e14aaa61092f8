"""Send the receiver's status events that are still unsent (after the sender was down, say)."""

from django.core.management.base import BaseCommand

from delivery.status_events import status_events_send_due


class Command(BaseCommand):
    help = (
        "Send unsent status events to RECEIVER_STATUS_EVENTS_URL, oldest first. Safe to run again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--limit", type=int, default=1000)

    def handle(self, *args, limit: int, **options):
        result = status_events_send_due(limit=limit)
        self.stdout.write(f"status events sent: {result.sent}, failed: {result.failed}")
