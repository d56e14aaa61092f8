"""The dispatcher's readiness probe for an orchestrator (an exec probe beside the dispatcher process):
exit 0 when its loop is turning, 1 with the reason otherwise. Reads the heartbeat only, so it answers
whether or not the database does (docs/operations.md, "Health endpoints")."""

import sys

from django.core.management.base import BaseCommand

from outbox.dispatch.heartbeat import readiness


class Command(BaseCommand):
    help = "Exit 0 when the dispatcher's loop has turned within --within seconds, else 1 with why."

    def add_arguments(self, parser):
        parser.add_argument(
            "--worker", default=None, help="The dispatcher's --worker name (default: any worker)."
        )
        parser.add_argument(
            "--within",
            type=float,
            default=30.0,
            help="Seconds since the last beat still counted as turning (a few --maintain-every).",
        )

    def handle(self, *args, worker=None, within=30.0, **options):
        verdict = readiness(worker, within=within)
        (self.stdout if verdict.ready else self.stderr).write(
            ("ready: " if verdict.ready else "not ready: ") + verdict.reason
        )
        if not verdict.ready:
            sys.exit(1)
