"""`manage.py audit_export --workspace 7 --from 2026-12-01 [--until 2026-12-02] --format csv|jsonl --as olga`

The same export as the console's Audit export page, with the same permissions (acting as the named user)
and the same audit record of the export. Writes to stdout, or to `--output FILE`: a file that cannot be
written is refused before the export, so that no export is recorded that nobody received."""

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from approvals.errors import ApprovalDenied, InvalidPayload, WorkspaceNotFound
from approvals.selectors import active_user_named
from console.audit_trail.export import audit_export
from console.audit_trail.period import parse_period
from lib.moments import BadMoment


class Command(BaseCommand):
    help = "Export a workspace's audit trail for a period as CSV or JSON Lines, acting as a named user."

    def add_arguments(self, parser):
        parser.add_argument("--workspace", type=int, required=True)
        parser.add_argument("--from", dest="since", required=True, help="a day or an ISO 8601 time")
        parser.add_argument("--until", default="", help="exclusive; default: a day after --from")
        parser.add_argument("--format", choices=("csv", "jsonl"), default="csv")
        parser.add_argument("--as", dest="username", required=True, help="whose permissions apply")
        parser.add_argument("--output", type=Path, help="a file instead of standard output")

    def handle(self, *args, **options):
        user = active_user_named(options["username"])
        if user is None:
            raise CommandError(f"no active user {options['username']!r}")
        if options["output"] and (problem := _unwritable(options["output"])):
            raise CommandError(f"--output: cannot write {options['output']}: {problem}")
        try:
            start, end = parse_period(options["since"], options["until"])
            result = audit_export(
                actor=user,
                workspace_id=options["workspace"],
                start=start,
                end=end,
                fmt=options["format"],
                channel="command",
            )
        except BadMoment as exc:
            raise CommandError(str(exc)) from exc
        except InvalidPayload as exc:
            raise CommandError("; ".join(exc.reasons)) from exc
        except (ApprovalDenied, WorkspaceNotFound) as exc:
            # The same answer for a workspace that does not exist and one the user may not see.
            raise CommandError(f"refused: {_refusal(exc)}") from exc
        if options["output"]:
            options["output"].write_text(result.content, encoding="utf-8")
        else:
            self.stdout.write(result.content, ending="")
        self.stderr.write(
            f"{len(result.records)} events of workspace {options['workspace']} exported "
            f"(audit export {result.export.pk})"
        )


def _unwritable(path: Path) -> str:
    """Why `path` cannot be written as the export's file; "" when it can."""
    if path.is_dir():
        return "it is a folder"
    if not path.parent.is_dir():
        return "its folder does not exist"
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        return "permission denied"
    return ""


def _refusal(exc: Exception) -> str:
    if isinstance(exc, WorkspaceNotFound):
        return "no such workspace among yours"
    return str(exc)
