"""Export what the archive holds for one workspace, as CSV or JSON lines, to stdout or a file
(docs/operations.md, "Retention"). Texts of the history go through the redaction function."""

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError

from lib.moments import BadMoment, parse_moment
from outbox.archive_export import FORMATS, archive_export


def _moment(text: str | None, name: str) -> datetime | None:
    if not text:
        return None
    try:
        return parse_moment(text, field=name)
    except BadMoment as exc:
        raise CommandError(str(exc)) from exc


class Command(BaseCommand):
    help = (
        "Export one workspace's archived handoffs archived in [--since, --until), as csv or jsonl."
    )

    def add_arguments(self, parser):
        parser.add_argument("--workspace", type=int, required=True, help="Workspace id.")
        parser.add_argument("--since", default=None, help="Archived at or after (date or time).")
        parser.add_argument("--until", default=None, help="Archived before (date or time).")
        parser.add_argument("--format", choices=FORMATS, default="jsonl")
        parser.add_argument("--output", default=None, help="A file to write (default stdout).")

    def handle(self, *args, workspace, since=None, until=None, output=None, **options):
        start, end = _moment(since, "--since"), _moment(until, "--until")
        if start and end and start >= end:
            raise CommandError("--since must be before --until")
        if output:
            with open(output, "w", encoding="utf-8", newline="") as out:
                count = archive_export(
                    out, workspace_id=workspace, fmt=options["format"], since=start, until=end
                )
            self.stderr.write(f"exported {count} archived handoff(s) to {output}")
            return
        count = archive_export(
            self.stdout, workspace_id=workspace, fmt=options["format"], since=start, until=end
        )
        self.stderr.write(f"exported {count} archived handoff(s)")
