"""`manage.py handoffs list|show|retry|reconcile|cancel|assign|acknowledge --as <username>`: the console's
handoff screens and actions from a terminal, through the same services, permissions and audit
(`console/cli/`). A refusal exits non-zero with the console's words: 3 not allowed, 4 no such handoff,
5 not done (the state refuses it), 6 bad input, 7 a risk to confirm first (--confirm-risk)."""

import argparse

from django.core.management.base import BaseCommand, CommandError

from console.cli.commands import add_subcommands, common_options, run
from console.cli.frame import Refused
from console.cli.output import as_json, as_text


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        subparsers = parser.add_subparsers(dest="subcommand", required=True)
        add_subcommands(subparsers, common_options())

    def handle(self, *args, subcommand: str, **options):
        try:
            result = run(subcommand, options)
        except Refused as refused:
            if options["json"]:
                self.stdout.write(
                    as_json({"ok": False, "status": refused.status, "text": refused.text})
                )
            raise CommandError(refused.text, returncode=refused.exit_status) from refused
        except argparse.ArgumentTypeError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        self.stdout.write(
            as_json({"ok": True, **result}) if options["json"] else as_text(subcommand, result)
        )
