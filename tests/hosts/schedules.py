"""Faults chosen by a machine: a seeded schedule of faults between hosts (tests/hosts/harness.py), played
against dispatchers at work, and shrunk to the shortest schedule that still fails.

`draw(seed, seconds)` draws the schedule: partitions (a dispatcher from PostgreSQL, a dispatcher from the
receiver), answers lost one way, loss and delay on the receiver link, SIGKILL and SIGSTOP of a dispatcher,
PostgreSQL restarts (fast and immediate), backends terminated, a restart of the pooler (PgBouncer, which d3
goes through), the accounts API refusing every call (401: its token changed, then restored), and a clock jump
on a dispatcher host; spells of the receiver refusing every call (401) or lying (a 200 whose body is not the
receipt of the task it made), and of the SMTP link delayed, dropped or reset (the relay in front of the mail
host); the receiver also fails a seeded share of keys once each (lost answers, slow answers, 5xx, 429).
`play(run, schedule)` plays it while people approve requests through the web app (tests/hosts/three_hosts.py:
each approval's three steps go to three destinations, each a host of its own), heals everything, waits for the
handoffs to settle and returns what the shared checker (tests/faults/invariants.py) found broken, with the
time to settle after the heal; then waits for every incident of a healed cause to resolve by the product's own
alert sweep, and says per fault what happened while it lasted (tests/hosts/spells.py).
`shrink(schedule, fails)` removes faults one at a time while the schedule still fails.
"""

import json
import random
import shlex
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.acceptance.three_destinations import ACCOUNTS_TOKEN
from tests.faults.invariants import check_invariants, incidents_open_for_healed_causes
from tests.hosts.spells import broken_keys, spell_lines, spell_report, spells_of_keys
from tests.hosts.three_hosts import MAIL, STEPS, ThreeHosts
from tests.processes import manage_argv

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
    "pooler_restart",
    "accounts_401",
    "clock_jump",
    "receiver_401",
    "receiver_lies",
    "smtp_delay",
    "smtp_drop",
    "smtp_reset",
)
# The receiver's spells (delivery/faults.py "spells"): while one lasts every create call is refused (401: its
# credential changed) or answered with a lying receipt (a 200 whose body is not the task's receipt).
RECEIVER_SPELLS = {"receiver_401": "http_401", "receiver_lies": "malformed"}
# The receiver's spell file, in the run's tmp_path: the player writes it, the receiver reads it.
SPELLS_FILE = "receiver-spells"
# The SMTP link's faults, played by the relay in front of the mail host's server (tests/hosts/relay.py).
SMTP_MODES = {"smtp_drop": "drop", "smtp_reset": "reset"}
# The dispatcher host behind the pooler.
POOLED = ("d3",)
# A clock jump under libfaketime 0.9.10 (Debian 12): it fakes CLOCK_MONOTONIC as the wall clock, so a
# dispatcher under it that waits idle (threading.Event.wait: glibc's sem_clockwait is not intercepted) never
# wakes, and with FAKETIME_DONT_FAKE_MONOTONIC time.sleep fails (EINVAL). So the jumped host's dispatcher is
# one started under libfaketime at the fault's start (on the true time), its clock jumps halfway through the
# fault, and at the fault's end it is killed (SIGKILL: a stalled one answers no SIGTERM) and replaced by one
# on the true clock: while the fault lasts it may stall when idle, which the schedule counts as a stop.
CLOCK_JUMPS = (-300, -60, 60, 300)
# The receiver's faults for a seeded share of keys, once per key; 401 and lying receipts are spells.
RECEIVER_FAULT_KINDS = ["drop_after_commit", "slow", "http_500", "http_503", "http_429"]
# Settling after the heal fails when no handoff settles for SETTLE_DEADLINE, or past SETTLE_LIMIT in all.
SETTLE_DEADLINE = 240.0
SETTLE_LIMIT = 1800.0
# The alert sweep's security window is a minute in these runs: an incident of refused signatures (a clock
# jump) resolves a minute after the last one.
INCIDENTS_DEADLINE = 180.0
ALERT_SWEEP_EVERY = "2"


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


def draw(seed: int, seconds: float, kinds: tuple[str, ...] = KINDS) -> list[Fault]:
    """About one fault every 6 seconds of the schedule, each lasting 2 to 20 seconds (a lease is 8), of
    the `kinds` given (every kind by default)."""
    rng = random.Random(seed)
    faults = []
    for _ in range(max(1, int(seconds / 6))):
        kind = rng.choice(kinds)
        duration = rng.uniform(2, min(20, seconds))
        start = rng.uniform(0, max(0.0, seconds - duration))
        amount = {
            "loss": rng.choice([5, 20, 50]),
            "delay": rng.choice([5, 20, 40]),
            "smtp_delay": rng.choice([5, 20, 40]),
            "clock_jump": rng.choice(CLOCK_JUMPS),
        }.get(kind, 0)
        faults.append(
            Fault(kind, round(start, 1), round(duration, 1), rng.choice(DISPATCHERS), amount)
        )
    return sorted(faults, key=lambda f: f.start)


def receiver_faults(seed: int, spells: Path) -> str:
    return json.dumps(
        {
            "fraction": 0.1,
            "seed": seed,
            "kinds": RECEIVER_FAULT_KINDS,
            "slow_seconds": 7,
            "spells": str(spells),
        }
    )


class Player:
    """Applies and heals the faults of a schedule on a run."""

    def __init__(self, run, three):
        self.run, self.net, self.three, self.restarts = run, run.network, three, 0
        self.workers = {host: host for host in DISPATCHERS}
        self.timers: list[threading.Timer] = []
        # Faults in force by kind (accounts_401, the receiver's spells, the SMTP relay's): one ends, another
        # may still hold; the accounts token comes back when the last accounts_401 ends.
        self.in_force: Counter = Counter()
        self.spells_file = run.tmp_path / SPELLS_FILE

    def _replace(self, host: str) -> None:
        """Kill the host's dispatcher and start another on it (a new worker name)."""
        self.run.kill(self.workers[host])
        self.restarts += 1
        self.workers[host] = f"{host}-r{self.restarts}"
        self.run.start_dispatcher(host, self.workers[host])

    def begin(self, fault: Fault) -> None:
        worker = self.workers[fault.host]
        match fault.kind:
            case "partition_db":
                self.net.partition(fault.host, "db")
                if fault.host in self.run.pooled:
                    self.net.partition(fault.host, "pooler")
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
            case "pooler_restart":
                self.run.pooler.restart()
            case "accounts_401":
                self.in_force[fault.kind] += 1
                self.three.ledger_token("a-token-nobody-sends")
            case "receiver_401" | "receiver_lies" | "smtp_drop" | "smtp_reset":
                self.in_force[fault.kind] += 1
                self._write_spells()
            case "smtp_delay":
                self.net.delay("mail", fault.amount / 10)
            case "clock_jump":
                if fault.host in self.run.clock_files:
                    return  # a jump already in force on this host: this one is a no-op
                self.run.own_clock(fault.host, 0)
                self._replace(fault.host)
                timer = threading.Timer(fault.duration / 2, self._jump, (fault.host, fault.amount))
                timer.start()
                self.timers.append(timer)

    def end(self, fault: Fault) -> None:
        match fault.kind:
            case "partition_db":
                self.net.unpartition(fault.host, "db")
                if fault.host in self.run.pooled:
                    self.net.unpartition(fault.host, "pooler")
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
            case "accounts_401":
                self.in_force[fault.kind] -= 1
                if not self.in_force[fault.kind]:
                    self.three.ledger_token(ACCOUNTS_TOKEN)
            case "receiver_401" | "receiver_lies" | "smtp_drop" | "smtp_reset":
                self.in_force[fault.kind] -= 1
                self._write_spells()
            case "smtp_delay":
                self.net.delay("mail", 0)
            case "clock_jump":
                if self.run.clock_files.pop(fault.host, None) is not None:
                    self._replace(fault.host)

    def _write_spells(self) -> None:
        """The receiver's spell file (written whole, then renamed) and the SMTP relay's mode, from the
        spells in force (a reset wins over a drop)."""
        kinds = [RECEIVER_SPELLS[k] for k in RECEIVER_SPELLS if self.in_force[k] > 0]
        tmp = self.spells_file.with_suffix(".tmp")
        tmp.write_text(" ".join(kinds) + "\n")
        tmp.replace(self.spells_file)
        modes = [SMTP_MODES[k] for k in ("smtp_reset", "smtp_drop") if self.in_force[k] > 0]
        self.net.relay_mode("mail", modes[0] if modes else "")

    def _jump(self, host: str, seconds: int) -> None:
        # The fault may have ended first (its end was due when a slow step let the loop reach it).
        if host in self.run.clock_files:
            self.run.set_clock(host, seconds)

    def close(self) -> None:
        for timer in self.timers:
            timer.cancel()


@dataclass
class Outcome:
    keys: list[str]
    broken: dict
    settle_seconds: float | None
    approvals: int = 0
    # Figures for a soak's record: the receiver's own faults fired by kind, incidents opened and resolved,
    # and how long the last incident of a healed cause took to resolve after the handoffs settled.
    figures: dict = field(default_factory=dict)


def play(run, schedule: list[Fault], *, seed: int, seconds: float) -> Outcome:
    """Play `schedule` for `seconds` on `run` (fresh databases, nothing started) while the desk approves
    requests through the web app; heal; wait for every handoff to settle; check the guarantees; wait for
    every incident of a healed cause to resolve."""
    run.start_receiver(faults=receiver_faults(seed, run.tmp_path / SPELLS_FILE))
    run.start_pooler(*POOLED)
    three = ThreeHosts(run)
    run.extra_env.update(three.env())
    three.start()
    _start_alert_sweep(run)
    for host in DISPATCHERS:
        run.start_dispatcher(host)
    player = Player(run, three)
    events = sorted(
        [(f.start, 0, n, f) for n, f in enumerate(schedule)]
        + [(f.start + f.duration, 1, n, f) for n, f in enumerate(schedule)],
        key=lambda e: (e[0], e[1]),
    )
    started, began = time.monotonic(), time.time()
    try:
        while events or time.monotonic() - started < seconds:
            while events and events[0][0] <= time.monotonic() - started:
                _, ending, _, fault = events.pop(0)
                (player.end if ending else player.begin)(fault)
            if time.monotonic() - started >= seconds and "desk" in run.procs:
                three.stop_desk()
            time.sleep(0.1)
    finally:
        player.close()
    three.stop_desk()
    run.network.heal()
    healed = time.monotonic()
    settle_seconds = _wait_settled(run, three)
    keys = three.approved_keys()
    with run.connect() as outbox, run.connect("delivery") as receiver:
        broken = check_invariants(
            outbox, receiver, keys, effects=three.effects(), persons_may_take=frozenset({MAIL})
        ).broken()
    if settle_seconds is None:
        broken["not settled within the deadline"] = SETTLE_DEADLINE
    if not keys:
        broken["no request approved through the web app"] = 0
    settled_at = time.monotonic()
    if open_incidents := _wait_incidents_resolved(run):
        broken["incidents open for a healed cause"] = open_incidents
    figures = _figures(run)
    figures["spells"] = spell_report(run, schedule, began)
    print(spell_lines(figures["spells"]), flush=True)
    if keys_broken := broken_keys(broken):
        # What each key the checker names went through: the faults in force while its calls were made.
        figures["spells_of_broken_keys"] = spells_of_keys(run, schedule, began, keys_broken)
    figures["incidents_resolved_after_settle_seconds"] = round(time.monotonic() - settled_at, 1)
    if run.exited():
        broken["processes exited"] = run.exited()
    return Outcome(
        keys,
        broken,
        None if settle_seconds is None else settle_seconds - healed,
        three.desk_approvals(),
        figures,
    )


def _figures(run) -> dict:
    with run.connect("delivery") as receiver:
        fired = dict(
            receiver.execute(
                "SELECT kind, count(*) FROM delivery_firedfault GROUP BY kind"
            ).fetchall()
        )
    with run.connect() as outbox:
        incidents = dict(
            outbox.execute(
                "SELECT kind || ' ' || state, count(*) FROM reconciliation_incident GROUP BY 1"
            ).fetchall()
        )
        states = dict(
            outbox.execute("SELECT state, count(*) FROM outbox_handoff GROUP BY state").fetchall()
        )
    return {"receiver_faults_fired": fired, "incidents": incidents, "handoff_states": states}


def _start_alert_sweep(run) -> None:
    """The product's alert sweep (`manage.py send_alerts`, which keeps incidents in step with their causes),
    every few seconds on the web host, as a deployment schedules it. A process each sweep, without Django's
    system checks (`manage_argv`): with them each one imported the whole web app's URLs first."""
    env = {**run.base_env(), "ALERT_SECURITY_WINDOW_MINUTES": "1"}
    loop = f"while :; do {shlex.join(manage_argv('send_alerts'))}; sleep {ALERT_SWEEP_EVERY}; done"
    run.spawn("alerts", "web", ["sh", "-c", loop], env)


def _counts(run) -> tuple[int, int]:
    """The handoffs open now, and the ones settled (every other)."""
    with run.connect() as conn:
        return conn.execute(
            "SELECT count(*) FILTER (WHERE state IN ('pending', 'in_flight', 'uncertain')), "
            "count(*) FILTER (WHERE state NOT IN ('pending', 'in_flight', 'uncertain')) "
            "FROM outbox_handoff"
        ).fetchone()


def _wait_settled(run, three) -> float | None:
    """Nothing open, and every approved request's steps made (a step is made once its predecessor is
    delivered; a step after one handed to a person waits for that person). The deadline judges what it
    measures, not an idle machine's speed: it fails once SETTLE_DEADLINE has gone by with no handoff
    settled (a stall), however long a loaded machine takes to work through a backlog that keeps moving
    (at most SETTLE_LIMIT in all)."""
    began = stalled_since = time.monotonic()
    settled_before = -1
    while time.monotonic() - began < SETTLE_LIMIT:
        open_now, settled = _counts(run)
        if not open_now and _steps_made(run, three):
            return time.monotonic()
        if settled > settled_before:
            settled_before, stalled_since = settled, time.monotonic()
        elif time.monotonic() - stalled_since > SETTLE_DEADLINE:
            return None
        time.sleep(0.5)
    return None


def _steps_made(run, three) -> bool:
    with run.connect() as conn:
        states = dict(conn.execute("SELECT action_key, state FROM outbox_handoff").fetchall())
    waiting = False  # an earlier step of the same request went to a person
    for key in three.approved_keys():
        if key.endswith(f":{STEPS[0]}"):
            waiting = False
        if key not in states and not waiting:
            return False
        waiting = waiting or states.get(key) == "needs_attention"
    return True


def _wait_incidents_resolved(run) -> list[tuple]:
    """Every incident of a healed cause resolved by the alert sweep; the ones still open once none has
    resolved for INCIDENTS_DEADLINE (a stall, not a slow machine), or after SETTLE_LIMIT in all."""
    began = stalled_since = time.monotonic()
    fewest = None
    while True:
        with run.connect() as conn:
            still = incidents_open_for_healed_causes(conn)
        now = time.monotonic()
        if fewest is None or len(still) < fewest:
            fewest, stalled_since = len(still), now  # one resolved: the sweep is moving
        if not still or now - stalled_since > INCIDENTS_DEADLINE or now - began > SETTLE_LIMIT:
            return still
        time.sleep(1)


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
