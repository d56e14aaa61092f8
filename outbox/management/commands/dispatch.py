import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from outbox import dispatcher, runner
from outbox.destinations.registry import destination_problems


class Command(BaseCommand):
    help = (
        "Deliver due handoffs of every enabled destination in the foreground (the workers' loops)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--once", action="store_true", help="Sweep, drain what is due, print a summary, exit."
        )
        parser.add_argument(
            "--worker", default=None, help="Worker name recorded on claims and attempts."
        )
        parser.add_argument("--idle-sleep", type=float, default=0.5)
        parser.add_argument(
            "--maintain-every",
            type=float,
            default=5.0,
            help="Seconds between passes that expire leases and settle uncertain outcomes.",
        )

    def handle(self, *args, once=False, worker=None, idle_sleep=0.5, maintain_every=5.0, **options):
        if once:
            _refuse_on(destination_problems())
            stats = dispatcher.sweep(worker=worker)
            self.stdout.write(
                f"claimed={stats.claimed} delivered={stats.delivered} duplicates_prevented={stats.duplicates} "
                f"retrying={stats.retrying} uncertain={stats.uncertain} needs_attention={stats.needs_attention} "
                f"expired_leases={stats.expired_leases} settled={stats.settled}"
            )
            return
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        signal.signal(signal.SIGINT, lambda *_: stopping.set())
        # An enabled destination that cannot be built (unknown kind, invalid configuration, missing secret)
        # stops the start: a dispatcher that serves the others and never this one fails silently. The
        # database being unavailable does not: the check waits for it, as the loops do.
        problems = runner.startup_problems(stopping)
        if problems is None:
            return
        _refuse_on(problems)
        self.stdout.write(
            f"dispatching as {worker or dispatcher.default_worker_name()}; Ctrl-C to stop"
        )
        stats = runner.run_forever(
            worker=worker, idle_sleep=idle_sleep, maintain_every=maintain_every, stop=stopping
        )
        self.stdout.write(f"stopped: claimed={stats.claimed} delivered={stats.delivered}")


def _refuse_on(problems: dict[str, str]) -> None:
    if problems:
        raise CommandError(
            "cannot dispatch: " + "; ".join(problem for _name, problem in sorted(problems.items()))
        )
