"""The gthread worker of the bench's timed receiver (`bench/receiver_timing.py`), in a module of its own
because gunicorn's master imports the worker class: importing the receiver there would load the product
before the fork, which the bench's receiver does not do otherwise."""

import threading
import time

from gunicorn.workers.gthread import ThreadWorker

# What this thread's current request has noted so far (the WSGI callable reads and adds to it).
current = threading.local()


class TimedThreadWorker(ThreadWorker):
    """gunicorn's gthread worker (`--worker-class bench.receiver_timing_worker.TimedThreadWorker`) noting
    when its poller handed a request's connection to the thread pool: the request's bytes were there to
    read (a new connection: accepted). The wait for a free thread and the parsing after it are the
    receiver's."""

    def enqueue_req(self, conn):
        conn.bench_readable_at = time.time()
        super().enqueue_req(conn)

    def handle(self, conn):
        current.readable = getattr(conn, "bench_readable_at", None)
        return super().handle(conn)
