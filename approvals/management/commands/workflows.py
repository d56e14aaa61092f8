"""`manage.py workflows apply FILE | check FILE | list`: workflows kept under version control.

    apply FILE   publish a new rule version of each workflow whose schema or steps differ from the one in
                 force (JSON: {"workflows": [{"name", "schema", "steps": [...], "notes", "removes"}]}), all
                 or nothing; a step in force that the file lacks must be named in `removes`; every step's
                 destination must be an enabled destination
    check FILE   the same checks, nothing written
    list         each workflow in force: its version and its steps with their destinations

See docs/intake.md, "Workflows as data".
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import RuleVersion
from approvals.rules import rules_for
from approvals.services.workflow_files import workflows_apply, workflows_document_problems
from lib.json_config import JsonConfigRefused, load_json_config


def _document(path: str):
    try:
        return load_json_config(path)
    except JsonConfigRefused as exc:
        raise CommandError(str(exc)) from exc


class Command(BaseCommand):
    help = "Workflows as data: apply or check a file of them, list those in force."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="command", required=True)
        apply = commands.add_parser(
            "apply", help="Publish the workflows of a JSON file that changed."
        )
        apply.add_argument("file")
        apply.add_argument(
            "--as",
            dest="username",
            default="",
            help="whose permission publishes (default: none, the deployment)",
        )
        check = commands.add_parser("check", help="Check a file of workflows; write nothing.")
        check.add_argument("file")
        commands.add_parser("list", help="The workflows in force and their steps.")

    def handle(self, *args, **options):
        getattr(self, f"_{options['command']}")(options)

    def _apply(self, options) -> None:
        actor = None
        if options["username"]:
            actor = (
                get_user_model()
                .objects.filter(username=options["username"], is_active=True)
                .first()
            )
            if actor is None:
                raise CommandError(f"no active user {options['username']!r}")
        try:
            changes = workflows_apply(document=_document(options["file"]), actor=actor)
        except InvalidPayload as exc:
            raise CommandError("nothing applied:\n  " + "\n  ".join(exc.reasons)) from exc
        except ApprovalDenied as exc:
            raise CommandError(f"refused: {exc}") from exc
        for change in changes:
            self.stdout.write(change.describe())

    def _check(self, options) -> None:
        if problems := workflows_document_problems(_document(options["file"])):
            raise CommandError("\n  ".join([f"{options['file']} cannot be applied:", *problems]))
        self.stdout.write(f"{options['file']}: can be applied")

    def _list(self, options) -> None:
        names = (
            RuleVersion.objects.values_list("workflow", flat=True).distinct().order_by("workflow")
        )
        for name in names:
            rules = rules_for(name)
            steps = (
                ", ".join(
                    f"{s['name']} -> {s.get('destination') or 'the default destination'}"
                    for s in rules.steps
                )
                or "one step to the default destination"
            )
            self.stdout.write(f"{name}\t{rules.version}\t{steps}")
