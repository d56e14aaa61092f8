"""Faults chosen by a machine: a seeded schedule of faults between hosts (tests/hosts/harness.py), played
against dispatchers at work, and shrunk to the shortest schedule that still fails.

`draw(seed, seconds)` draws the schedule: partitions (a dispatcher from PostgreSQL, a dispatcher from the
receiver), answers lost one way, loss and delay on the receiver link, SIGKILL and SIGSTOP of a dispatcher,
PostgreSQL restarts (fast and immediate), backends terminated; the receiver
also fails a seeded share of calls (lost answers, slow answers, 5xx, 429). `play(run, schedule)` plays it while
handoffs arrive in waves, heals everything, waits for the handoffs to settle and returns what the shared
checker (tests/faults/invariants.py) found broken, with the time to settle after the heal.
`shrink(schedule, fails)` removes faults one at a time while the schedule still fails.
"""

import random
import signal
import time
from dataclasses import dataclass

from tests.faults.invariants import check_invariants

DISPATCHERS = ("d1", "d2", "d3")
KINDS = (
    "partition_db",
    "partition_receiver",
    "answers_lost",
    "loss",
    "delay",
    "sigkill",
    "sigstop",
    "pg_restart",
    "pg_crash",
    "terminate_backends",
)
# Clock jumps are not drawn: libfaketime 0.9.10 (Debian 12) fakes CLOCK_MONOTONIC as the wall clock, so a
# dispatcher under it waits forever in threading.Event.wait (glibc's sem_clockwait is not intercepted),
# and with FAKETIME_DONT_FAKE_MONOTONIC time.sleep fails (EINVAL). A dispatcher that idles once then stops
# claiming: a fault of the harness, not of the product. test_partitions.py's clock jump keeps its
# dispatcher busy instead.
RECEIVER_FAULT_KINDS = ["drop_after_commit", "slow", "http_500", "http_503", "http_429"]
SETTLE_DEADLINE = 240.0
WAVE_EVERY = 4.0
WAVE_SIZE = 15


@dataclass(frozen=True)
class Fault:
    kind: str
    start: float  # seconds from the schedule's start
    duration: float
    host: str = ""  # the dispatcher it strikes, when it strikes one
    amount: int = 0  # loss percent, delay in tenths of a second, clock jump in seconds

    def __str__(self) -> str:
        on = f" {self.host}" if self.host else ""
        amount = f" ({self.amount})" if self.amount else ""
        return f"{self.kind}{on}{amount} at {self.start:.0f}s for {self.duration:.0f}s"


def draw(seed: int, seconds: float) -> list[Fault]:
    """About one fault every 6 seconds of the schedule, each lasting 2 to 20 seconds (a lease is 8)."""
    rng = random.Random(seed)
    faults = []
    for _ in range(max(1, int(seconds / 6))):
        kind = rng.choice(KINDS)
        duration = rng.uniform(2, min(20, seconds))
        start = rng.uniform(0, max(0.0, seconds - duration))
        amount = {
            "loss": rng.choice([5, 20, 50]),
            "delay": rng.choice([5, 20, 40]),
        }.get(kind, 0)
        faults.append(
            Fault(kind, round(start, 1), round(duration, 1), rng.choice(DISPATCHERS), amount)
        )
    return sorted(faults, key=lambda f: f.start)


def receiver_faults(seed: int) -> str:
    import json

    return json.dumps(
        {"fraction": 0.1, "seed": seed, "kinds": RECEIVER_FAULT_KINDS, "slow_seconds": 7}
    )


class Player:
    """Applies and heals the faults of a schedule on a run."""

    def __init__(self, run):
        self.run, self.net, self.restarts = run, run.network, 0
        self.workers = {host: host for host in DISPATCHERS}

    def begin(self, fault: Fault) -> None:
        worker = self.workers[fault.host]
        match fault.kind:
            case "partition_db":
                self.net.partition(fault.host, "db")
            case "partition_receiver":
                self.net.partition(fault.host, "receiver")
            case "answers_lost":
                self.net.drop_answers("receiver", fault.host)
            case "loss":
                self.net.loss("receiver", fault.amount)
            case "delay":
                self.net.delay("receiver", fault.amount / 10)
            case "sigkill":
                self.run.kill(worker)
            case "sigstop":
                self.run.signal(worker, signal.SIGSTOP)
            case "pg_restart":
                self.run.server.stop("fast")
                self.run.server.start()
            case "pg_crash":
                self.run.server.stop("immediate")
                self.run.server.start()
            case "terminate_backends":
                self.run.server.sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = ANY(%s) AND pid <> pg_backend_pid()",
                    params=(list(self.run.names.values()),),
                )

    def end(self, fault: Fault) -> None:
        match fault.kind:
            case "partition_db":
                self.net.unpartition(fault.host, "db")
            case "partition_receiver" | "answers_lost":
                self.net.unpartition(fault.host, "receiver")
            case "loss":
                self.net.loss("receiver", 0)
            case "delay":
                self.net.delay("receiver", 0)
            case "sigkill":
                self.restarts += 1
                worker = f"{fault.host}-r{self.restarts}"
                self.workers[fault.host] = worker
                self.run.start_dispatcher(fault.host, worker)
            case "sigstop":
                self.run.signal(self.workers[fault.host], signal.SIGCONT)


@dataclass
class Outcome:
    keys: list[str]
    broken: dict
    settle_seconds: float | None


def play(run, schedule: list[Fault], *, seed: int, seconds: float, make_handoffs) -> Outcome:
    """Play `schedule` for `seconds` on `run` (fresh databases, nothing started), handoffs arriving in
    waves; heal; wait for every handoff to settle; check the guarantees."""
    run.start_receiver(faults=receiver_faults(seed))
    for host in DISPATCHERS:
        run.start_dispatcher(host)
    player = Player(run)
    keys: list[str] = []
    events = sorted(
        [(f.start, 0, n, f) for n, f in enumerate(schedule)]
        + [(f.start + f.duration, 1, n, f) for n, f in enumerate(schedule)],
        key=lambda e: (e[0], e[1]),
    )
    started, next_wave, wave = time.monotonic(), 0.0, 0
    while events or time.monotonic() - started < seconds:
        now = time.monotonic() - started
        if now >= next_wave and now < seconds:
            wave += 1
            keys += make_handoffs(run, WAVE_SIZE, workspace_id=100 + wave)
            next_wave = now + WAVE_EVERY
        while events and events[0][0] <= time.monotonic() - started:
            _, ending, _, fault = events.pop(0)
            (player.end if ending else player.begin)(fault)
        time.sleep(0.1)
    run.network.heal()
    healed = time.monotonic()
    settle_seconds = _wait_settled(run, keys)
    with run.connect() as outbox, run.connect("delivery") as receiver:
        broken = check_invariants(outbox, receiver, keys).broken()
    if settle_seconds is None:
        broken["not settled within the deadline"] = SETTLE_DEADLINE
    if run.exited():
        broken["processes exited"] = run.exited()
    return Outcome(keys, broken, None if settle_seconds is None else settle_seconds - healed)


def _wait_settled(run, keys: list[str]) -> float | None:
    deadline = time.monotonic() + SETTLE_DEADLINE
    while time.monotonic() < deadline:
        with run.connect() as conn:
            open_ = conn.execute(
                "SELECT count(*) FROM outbox_handoff WHERE action_key = ANY(%s) "
                "AND state IN ('pending', 'in_flight', 'uncertain')",
                (keys,),
            ).fetchone()[0]
        if not open_:
            return time.monotonic()
        time.sleep(0.5)
    return None


def shrink(schedule: list[Fault], fails, *, max_runs: int = 6) -> list[Fault]:
    """The shortest schedule found that still `fails`: faults removed one at a time, at most `max_runs`
    replays (each replay is a whole run)."""
    runs = 0
    changed = True
    while changed and runs < max_runs:
        changed = False
        for n in range(len(schedule)):
            if runs >= max_runs:
                break
            candidate = schedule[:n] + schedule[n + 1 :]
            runs += 1
            if candidate and fails(candidate):
                schedule, changed = candidate, True
                break
    return schedule
