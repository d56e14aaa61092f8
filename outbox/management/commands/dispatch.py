import signal

from django.core.management.base import BaseCommand

from outbox import dispatcher


class Command(BaseCommand):
    help = "Deliver due handoffs in the foreground (the same loop the workers run)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Sweep, drain what is due, print a summary, exit.")
        parser.add_argument("--worker", default=None, help="Worker name recorded on claims and attempts.")
        parser.add_argument("--idle-sleep", type=float, default=0.5)
        parser.add_argument("--sweep-every", type=float, default=5.0)

    def handle(self, *args, once=False, worker=None, idle_sleep=0.5, sweep_every=5.0, **options):
        if once:
            stats = dispatcher.sweep(worker=worker)
            self.stdout.write(
                f"claimed={stats.claimed} delivered={stats.delivered} duplicates_prevented={stats.duplicates} "
                f"retrying={stats.retrying} uncertain={stats.uncertain} needs_attention={stats.needs_attention} "
                f"expired_leases={stats.expired_leases} settled={stats.settled}"
            )
            return
        stopping = {"now": False}

        def stop(*_):
            stopping["now"] = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"dispatching as {worker or dispatcher.default_worker_name()}; Ctrl-C to stop")
        stats = dispatcher.run_forever(worker=worker, idle_sleep=idle_sleep, sweep_every=sweep_every,
                                       should_stop=lambda: stopping["now"])
        self.stdout.write(f"stopped: claimed={stats.claimed} delivered={stats.delivered}")
