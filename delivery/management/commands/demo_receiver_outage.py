"""`manage.py demo_receiver_outage --seconds 60`: the demo's receiver is down for a minute (every call of
its task API answers 503), to see an outage in the console; `--end` ends it early (`delivery/outage.py`).
With `make run` serving, in another terminal: `scripts/manage.sh demo_receiver_outage --seconds 60`."""

import datetime

from django.core.management.base import BaseCommand, CommandError

from delivery.outage import outage_end, outage_start


class Command(BaseCommand):
    help = "Make the bundled receiver unavailable (503 on every task API call) for a while, or end that."

    def add_arguments(self, parser):
        parser.add_argument("--seconds", type=float, default=60.0, help="how long (default 60)")
        parser.add_argument("--end", action="store_true", help="end the outage now")

    def handle(self, *args, seconds: float, end: bool, **options):
        if end:
            outage_end()
            self.stdout.write("The receiver answers again.")
            return
        try:
            ends = outage_start(seconds=seconds)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        until = datetime.datetime.fromtimestamp(ends, tz=datetime.UTC)
        self.stdout.write(
            f"The receiver answers 503 to every call until {until:%H:%M:%S} UTC ({seconds:g} s). "
            "Watch /handoffs/ and /health/: after a few failures the destination is paused and probed; "
            "it resumes by itself. End it sooner: scripts/manage.sh demo_receiver_outage --end"
        )
