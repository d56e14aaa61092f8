"""What the dispatcher's process tests share: a receiver that runs a script in a process of its own on a
port the kernel chose, the dispatcher's `run_forever` in a thread of the test, and a deadline to wait
under."""

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from outbox.dispatch import runner
from tests.processes import KernelPort, popen_listening

DEADLINE_SECONDS = 60.0


@contextmanager
def script_receiver(script: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`script` run with the fd of its listening socket, its URL and process once it printed "listening"."""
    with KernelPort() as held:
        process = popen_listening(
            lambda fd: [sys.executable, "-c", script, str(fd)],
            held,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout.readline().strip() == "listening"
        yield f"http://127.0.0.1:{held.port}", process
        process.kill()
        process.wait(timeout=10)


@contextmanager
def dispatcher_running(*, on_stop: Callable[[], None] = lambda: None) -> Iterator[threading.Thread]:
    """`runner.run_forever` in a thread, stopped at the end; `on_stop` runs between the stop and the join
    (ending a receiver whose held call would keep a loop from ending)."""
    stop = threading.Event()
    dispatcher = threading.Thread(
        target=runner.run_forever,
        kwargs={"worker": "w1", "idle_sleep": 0.2, "maintain_every": 0.5, "stop": stop},
    )
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        stop.set()
        on_stop()
        dispatcher.join(timeout=60)


def wait_for(condition, what: str):
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_SECONDS}s: {what}"
        time.sleep(0.05)
