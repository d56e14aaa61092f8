"""The step of the restore runbook (docs/operations.md, "Restore from a backup") between the restore and the
start of the dispatchers: every pending handoff of the restored copy is asked about before any new attempt."""

from django.core.management.base import BaseCommand

from outbox.services.restore import handoffs_mark_restored


class Command(BaseCommand):
    help = (
        "After restoring the source database from a backup, before starting dispatchers: mark every "
        "pending handoff uncertain, so that settlement asks its destination before any new attempt."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--backup-taken-at",
            required=True,
            help="When the restored backup was taken (kept in each handoff's history).",
        )

    def handle(self, *args, backup_taken_at: str, **options):
        marked = handoffs_mark_restored(backup_taken_at=backup_taken_at)
        self.stdout.write(
            f"{marked} pending handoff(s) marked uncertain: each is looked up at its destination "
            "before any new attempt (start the dispatchers now)"
        )
