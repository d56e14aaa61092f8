import sys

from django.core.management.base import BaseCommand, CommandError

from outbox.models import Handoff
from reconciliation.models import FindingKind, RunStatus
from reconciliation.services.runs import RunProgress, reconciliation_run


class Command(BaseCommand):
    help = (
        "Compare every source handoff with the receiver's tasks (through the destination interface), "
        "record findings, and print a summary. Exit status 1 when the run failed, 2 with --strict and findings."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--batch-size", type=int, default=None, help="Rows per page on each side."
        )
        parser.add_argument(
            "--strict", action="store_true", help="Exit with status 2 when there are findings."
        )
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, batch_size=None, strict=False, no_progress=False, **options):
        # An estimate for the bar: the receiver's size is not known until it has been listed.
        expected = Handoff.objects.count()
        show = not no_progress

        def progress(p: RunProgress) -> None:
            if not show:
                return
            done = min(p.source_rows / expected, 1.0) if expected else 1.0
            bar = "#" * int(done * 30)
            line = (
                f"[{bar:<30}] {done:4.0%}  {p.keys_compared:,} keys compared "
                f"(source {p.source_rows:,}, receiver {p.receiver_rows:,}), {p.problems} problem(s)"
            )
            end = "\r" if self.stdout.isatty() else "\n"
            self.stdout.write(line, ending=end)
            sys.stdout.flush()

        run = reconciliation_run(batch_size=batch_size, trigger="command", progress=progress)
        if show and self.stdout.isatty():
            self.stdout.write("")
        self.stdout.write(f"Reconciliation run #{run.pk}: {run.status}")
        self.stdout.write(
            f"  source handoffs {run.source_keys:,} · receiver tasks {run.receiver_keys:,} · "
            f"keys compared {run.keys_compared:,} · pages of {run.batch_size}"
        )
        self.stdout.write(
            f"  approved requests checked for an outbox row: {run.approved_requests_checked:,}"
        )
        if run.status == RunStatus.FAILED:
            raise CommandError(f"reconciliation failed: {run.error}")
        if not run.findings_total:
            self.stdout.write(self.style.SUCCESS("  clean: source and receiver agree; no findings"))
            return
        for kind in FindingKind.values:
            n = run.findings_by_kind.get(kind, 0)
            if n:
                self.stdout.write(self.style.WARNING(f"  {kind}: {n}"))
        for finding in run.findings.order_by("kind", "action_key")[:20]:
            self.stdout.write(f"    {finding.kind} {finding.action_key}: {finding.next_action}")
        self.stdout.write(
            f"  new {run.new_findings}, resolved since the last run {run.resolved_findings}, "
            f"outcome validation failures {run.outcome_validation_failures}"
        )
        if strict:
            sys.exit(2)
