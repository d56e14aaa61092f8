"""The machine's schedules: the same seed draws the same schedule, and a failing one is shrunk to the faults
that make it fail (tests/hosts/schedules.py; the schedules themselves are played in test_schedules.py)."""

from tests.hosts.schedules import KINDS, Fault, draw, shrink


def test_a_seed_draws_the_same_schedule_every_time_and_another_seed_another():
    assert draw(38, 120) == draw(38, 120)
    assert draw(38, 120) != draw(39, 120)
    assert {fault.kind for fault in draw(38, 600)} <= set(KINDS)
    assert all(f.start >= 0 and f.start + f.duration <= 120 for f in draw(7, 120))


def test_a_failing_schedule_is_shrunk_to_the_faults_that_make_it_fail():
    schedule = [Fault(kind, float(n), 5.0, "d1") for n, kind in enumerate(KINDS)]
    replays = []

    def fails(candidate: list[Fault]) -> bool:
        replays.append(candidate)
        kinds = {fault.kind for fault in candidate}
        return {"partition_db", "sigstop"} <= kinds

    shortest = shrink(schedule, fails, max_runs=100)
    assert [fault.kind for fault in shortest] == ["partition_db", "sigstop"]
    replays.clear()
    shrink(schedule, fails, max_runs=3)
    assert len(replays) == 3, "each replay is a whole run: their number is bounded"
