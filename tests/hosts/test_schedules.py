"""Faults chosen by a machine (tests/hosts/schedules.py): seeded schedules of partitions, loss, delay, kills,
stops, PostgreSQL and pooler restarts, terminated backends, refused credentials and clock jumps, played
between hosts of their own while people approve requests through the web app, each approval's three steps
going to three destinations (a receiver, an accounts API, an SMTP server); after the heal every guarantee of
tests/faults/invariants.py holds, and every incident of a healed cause resolves. A failing schedule prints
its seed and the shortest schedule that still fails.

`make test` plays the fixed seeds and one new seed (printed) for HOSTS_SCHEDULE_SECONDS each; `make soak
SEED=… MINUTES=…` plays one seed for as long as asked (HOSTS_SEEDS, HOSTS_SCHEDULE_SECONDS).
HOSTS_KINDS=pooler_restart,clock_jump draws only those kinds; HOSTS_REPLAY_FIRST_SECONDS=600 replays the first 10
minutes of a seed's schedule."""

import json
import os
import random
from collections import Counter

import pytest

from tests.hosts.harness import Run
from tests.hosts.schedules import KINDS, draw, play, shrink

pytestmark = [pytest.mark.postgres, pytest.mark.faults, pytest.mark.long, pytest.mark.hosts]
FIXED_SEEDS = [38]
SECONDS = float(os.environ.get("HOSTS_SCHEDULE_SECONDS", "30"))
# Only these kinds of faults (comma-separated names of schedules.KINDS), to see what one kind does.
KINDS_DRAWN = tuple(k for k in os.environ.get("HOSTS_KINDS", "").split(",") if k) or KINDS
# Each replay of a shrink is a whole run: a soak's schedule may be shrunk separately, shorter.
SHRINK_RUNS = int(os.environ.get("HOSTS_SHRINK_RUNS", "6"))
# A long soak's failure replayed in less time: only the faults of the seed's schedule over within its first
# that many seconds, played for that long (HOSTS_SCHEDULE_SECONDS still draws the schedule).
REPLAY_FIRST = float(os.environ.get("HOSTS_REPLAY_FIRST_SECONDS", "0"))


def seeds() -> list[int]:
    if os.environ.get("HOSTS_SEEDS"):
        return [int(s) for s in os.environ["HOSTS_SEEDS"].split(",")]
    return [*FIXED_SEEDS, random.SystemRandom().randrange(1, 10**6)]


@pytest.mark.parametrize("seed", seeds())
def test_machine_chosen_faults_between_hosts_keep_every_guarantee(
    hosts, hosts_cluster, tmp_path, seed
):
    print(f"hosts schedule seed {seed} ({SECONDS:.0f} s): HOSTS_SEEDS={seed} to play it again")
    schedule, seconds = draw(seed, SECONDS, KINDS_DRAWN), SECONDS
    if REPLAY_FIRST:
        schedule = [f for f in schedule if f.start + f.duration <= REPLAY_FIRST]
        seconds = REPLAY_FIRST
        print(f"replaying its first {seconds:.0f} s: {len(schedule)} faults")
    outcome = play(hosts, schedule, seed=seed, seconds=seconds)
    summary = {
        "seed": seed,
        "seconds": seconds,
        "approvals": outcome.approvals,
        "handoffs": len(outcome.keys),
        "faults": dict(Counter(f.kind for f in schedule)),
        "settled_after_heal_seconds": outcome.settle_seconds,
        **outcome.figures,
    }
    print(json.dumps(summary))
    if not outcome.broken:
        return
    replays = 0

    def fails(candidate) -> bool:
        nonlocal replays
        replays += 1
        (tmp_path / f"replay-{replays}").mkdir()
        run = Run(hosts_cluster, tmp_path / f"replay-{replays}")
        try:
            return bool(play(run, candidate, seed=seed, seconds=seconds).broken)
        finally:
            run.close()

    shortest = shrink(schedule, fails, max_runs=SHRINK_RUNS)
    pytest.fail(
        f"seed {seed} broke {outcome.broken}\nschedule: {[str(f) for f in schedule]}\n"
        f"shortest failing schedule: {[str(f) for f in shortest]}"
    )
