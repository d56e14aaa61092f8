"""`make run`'s set-up in one process: both databases migrated, static files collected, the demo loaded, its
alert channels set and the periodic work scheduled.

Each `manage.py` start imports Django and every app (about 3 s on a loaded 2-core machine); seven of them in
a row were most of a newcomer's wait for the first page. What the steps print goes to stderr (the terminal,
during start-up); stdout carries only the demo's report (with the password), which `scripts/run_local.sh`
keeps and shows under the addresses once the web app answers."""

from io import StringIO

from django.core.management import call_command
from django.core.management.base import BaseCommand

STEPS = (
    ("migrate", {"database": "default", "interactive": False, "verbosity": 0}),
    ("migrate", {"database": "delivery", "interactive": False, "verbosity": 0}),
    ("collectstatic", {"interactive": False, "verbosity": 0}),
)
AFTER_DEMO = (
    "demo_alert_channels",
    "schedule_sweeps",
    "schedule_reconciliation",
    "schedule_approvals",
)


class Command(BaseCommand):
    help = "make run's set-up: migrate both databases, collect static files, load the demo, schedule work."

    def add_arguments(self, parser):
        parser.add_argument("--destinations", required=True, help="the demo's destinations file")

    def handle(self, *args, destinations, **options):
        for name, kwargs in STEPS:
            call_command(name, stdout=self.stderr, stderr=self.stderr, **kwargs)
        demo_report = StringIO()
        call_command("demo", destinations=destinations, stdout=demo_report, stderr=self.stderr)
        for name in AFTER_DEMO:
            call_command(name, stdout=self.stderr, stderr=self.stderr)
        self.stdout.write(demo_report.getvalue(), ending="")
