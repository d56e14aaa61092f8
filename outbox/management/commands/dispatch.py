import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from outbox.destinations.registry import destination_problems, enabled_destination_names
from outbox.destinations.seed_variables import seed_variables_refused
from outbox.dispatch import dispatcher, runner
from outbox.dispatch.held_destinations import Holds, servable_names
from outbox.hold_lines import destinations_holds


class Command(BaseCommand):
    help = (
        "Deliver due handoffs of every enabled destination in the foreground (the workers' loops)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--once",
            action="store_true",
            help=(
                "Sweep, drain what is due, print a summary and what held each destination, exit 0 "
                "(held or not)."
            ),
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
            _refuse_on(seed_variables_refused())
            self._hold(Holds(), destination_problems())
            stats = dispatcher.sweep(worker=worker)
            self.stdout.write(
                f"claimed={stats.claimed} delivered={stats.delivered} duplicates_prevented={stats.duplicates} "
                f"retrying={stats.retrying} uncertain={stats.uncertain} needs_attention={stats.needs_attention} "
                f"expired_leases={stats.expired_leases} settled={stats.settled}"
            )
            self._say_held(delivered=stats.delivered)
            return
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        signal.signal(signal.SIGINT, lambda *_: stopping.set())
        holds = self.run_start(stopping)
        if holds is None:
            return
        self.stdout.write(
            f"dispatching as {worker or dispatcher.default_worker_name()}; Ctrl-C to stop"
        )
        stats = runner.run_forever(
            worker=worker,
            idle_sleep=idle_sleep,
            maintain_every=maintain_every,
            stop=stopping,
            holds=holds,
        )
        self.stdout.write(f"stopped: claimed={stats.claimed} delivered={stats.delivered}")

    def _say_held(self, *, delivered: int) -> None:
        """What held each enabled destination as the pass ended (its live holds, `manage.py destinations
        holds`' words), on stderr: a pass that sent nothing says why. The exit code stays 0: a hold is the
        product working as designed, and its handoffs wait; exit 1 is for a dispatcher that cannot start."""
        names = enabled_destination_names()
        holds = destinations_holds(names)
        for name in names:
            for line in holds[name].live:
                self.stderr.write(f"held {name}: {line.words}")
        if names and delivered == 0 and all(holds[name].held for name in names):
            self.stderr.write("nothing sent: every enabled destination is held")

    def run_start(self, stop: threading.Event) -> Holds | None:
        """The database being unavailable stops nothing: the start waits for it, as the loops do, and is made
        again from its beginning when a connection is lost at any of its queries. None when stopped first."""
        return runner.until_database_answers(stop, self._start)

    def _start(self) -> Holds:
        """A destination's problem stays its own: an enabled destination that cannot be served (unknown kind,
        invalid configuration, missing secret, a call that may outlive its lease) is held with its reason
        and one incident, and the others are served; only when none can be is the start refused, as it is
        when a seed variable disagrees with its destination's row."""
        problems = destination_problems()
        _refuse_on(seed_variables_refused())
        return self._hold(Holds(), problems)

    def _hold(self, holds: Holds, problems: dict[str, str]) -> Holds:
        """Hold each destination that cannot be served and say so; refuse when none can be."""
        if not servable_names(problems):
            _refuse_on([problem for _name, problem in sorted(problems.items())])
        holds.start(problems)
        for name, problem in sorted(problems.items()):
            self.stderr.write(f"not serving {name} (held, its handoffs wait): {problem}")
        return holds


def _refuse_on(problems: list[str]) -> None:
    if problems:
        raise CommandError("cannot dispatch: " + "; ".join(problems))
