"""A measurement of a lever, not a product path: the dispatcher loop with every claim of a batch sent as
its own single call, all in flight at once, and the outcomes recorded in one commit.

    .venv/bin/python bench/concurrent_dispatch.py --worker WORKER

It runs the product's own loop (`outbox.dispatch.runner.run_forever`) with a destination that tells the
dispatcher it takes a batch, and answers a batch with concurrent single calls to `POST /tasks` (the
receiver's batch endpoint is not used). So the dispatcher's batched path (lease check before the
calls, one outcome commit) carries a receiver that has no batch endpoint. Every call of a batch is in
flight at once, so the batch takes as long as its slowest call: the one-call-per-lease rule holds.

The loop of one given destination writes no heartbeat (only `manage.py dispatch`'s supervision does), so this
process beats once itself when started (imports done, the database answering), before its loop: the bench
starts measuring after that beat (`harness.Bench.dispatchers_started`), as it does for `manage.py dispatch`.
"""

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    from outbox.destinations import HttpDestination
    from outbox.dispatch import heartbeat, runner

    class ConcurrentSingleCalls(HttpDestination):
        def __init__(self, *, calls_in_flight: int, **config):
            super().__init__(max_connections=calls_in_flight, **config)
            self.supports_batch = True  # to the dispatcher: "give me the whole claim batch"
            self._threads = ThreadPoolExecutor(max_workers=calls_in_flight)

        def deliver_batch(self, outgoings):
            return list(self._threads.map(self.deliver, outgoings))

    config = {
        k: v for k, v in settings.HANDOFF_DESTINATION.items() if k not in ("kind", "supports_batch")
    }
    destination = ConcurrentSingleCalls(
        calls_in_flight=int(os.environ.get("BENCH_CALLS_IN_FLIGHT", "20")), **config
    )
    worker = sys.argv[sys.argv.index("--worker") + 1]
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    connection.ensure_connection()
    heartbeat.beat(worker)
    runner.run_forever(
        destination=destination,
        worker=worker,
        idle_sleep=0.5,
        maintain_every=5.0,
        stop=stopping,
    )


if __name__ == "__main__":
    main()
