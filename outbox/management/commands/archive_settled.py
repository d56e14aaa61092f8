"""Move settled handoffs older than HANDOFF_RETENTION_DAYS out of the hot tables into the archive, in short
batches (docs/operations.md, "Retention"). The django-q2 schedule (`manage.py schedule_retention`) runs the
same service; this command is for a first large run, a dry run, or a cron."""

from django.core.management.base import BaseCommand, CommandError

from outbox.services.retention import RetentionRun, handoffs_archive_settled


class Command(BaseCommand):
    help = (
        "Archive settled handoffs older than the retention age (HANDOFF_RETENTION_DAYS, default 30), in "
        "batches of HANDOFF_RETENTION_BATCH_SIZE (1000), each one short transaction. Background work that "
        "yields to delivery: after a batch it rests so that batches fill at most HANDOFF_RETENTION_DUTY_CYCLE "
        "(0.1) of the wall clock, and while at least HANDOFF_RETENTION_YIELD_BACKLOG (100) handoffs are due it "
        "begins no batch, for at most HANDOFF_RETENTION_MAX_YIELD_SECONDS (10) each. Destination holds (pauses, "
        "windows, Retry-After waits) that ended before the retention age are deleted (docs/operations.md, "
        '"Retention").'
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would move; change nothing."
        )
        parser.add_argument(
            "--batch-size", type=int, default=None, help="Rows per transaction (default 1000)."
        )
        parser.add_argument(
            "--older-than-days",
            type=float,
            default=None,
            help="Age of the last change (default HANDOFF_RETENTION_DAYS).",
        )
        parser.add_argument(
            "--max-batches", type=int, default=None, help="Stop after this many batches."
        )

    def handle(self, *args, dry_run=False, batch_size=None, older_than_days=None, **options):
        if batch_size is not None and not 1 <= batch_size <= 10_000:
            raise CommandError("--batch-size must be between 1 and 10000")
        if older_than_days is not None and older_than_days < 0:
            raise CommandError("--older-than-days must not be negative")
        run = handoffs_archive_settled(
            older_than_days=older_than_days,
            batch_size=batch_size,
            max_batches=options.get("max_batches"),
            dry_run=dry_run,
        )
        self.stdout.write(_summary(run))


def _summary(run: RetentionRun) -> str:
    """The command's last line: what moved (or would), what stayed, how long, and the holds pruned."""
    dry_run = run.dry_run
    verb = "would archive" if dry_run else "archived"
    return (
        f"{verb} {run.archived} handoff(s) in {run.batches} batch(es), {run.held} held "
        f"(finding, incident or unfinished work), {run.seconds:.1f} s"
        + (f", {run.rows_per_second:.0f} rows/s" if not dry_run and run.archived else "")
        + (
            f", waited {run.yielded_seconds:.1f} s for delivery ({run.yields} time(s))"
            if run.yields
            else ""
        )
        + (", stopped: a lock was not granted in time" if run.gave_up_on_lock else "")
        + f"; {'would prune' if dry_run else 'pruned'} {run.holds_pruned} destination hold(s) "
        "ended before the retention age"
    )
