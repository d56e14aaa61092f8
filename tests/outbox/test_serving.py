"""The schedule of a dispatcher's workers (`outbox/dispatch/serving.py`): one worker per destination at a time (a
second lane only for a wake-up during a turn), turns in order of waiting, idle destinations woken by name, limits and
maintenance kept. No database, no clock
waits: every turn asked for here is due at once, or the test says it is not due."""

import threading
from types import SimpleNamespace

from outbox.dispatch import serving
from outbox.dispatch.serving import Schedule, Turn

LONG = 3600.0  # an idle poll or a maintenance pass that never comes within a test


def schedule(
    *names: str,
    idle_sleep: float = LONG,
    maintain_every: float = LONG,
    lanes: int = 1,
    full_batch: int = 20,
) -> Schedule:
    plan = Schedule(
        idle_sleep=idle_sleep,
        maintain_every=maintain_every,
        stop=threading.Event(),
        lanes=lanes,
        full_batch=full_batch,
    )
    plan.serve(list(names))
    return plan


def test_a_destination_being_served_is_not_handed_to_a_second_worker():
    plan = schedule("crm", "mail")
    first, second = plan.take(), plan.take()
    assert {first[0], second[0]} == {"crm", "mail"}
    assert plan.due_now() == []
    plan.done(first[0], first[1], claimed=20)
    assert plan.due_now() == [first[0]]


def test_a_destination_with_a_backlog_waits_behind_the_others_already_waiting():
    plan = schedule("crm", "mail", "accounts")
    name, turn = plan.take()
    plan.done(name, turn, claimed=20)  # more may be due: back of the line
    following = [plan.take()[0] for _ in range(2)]
    assert name not in following
    assert plan.take()[0] == name


def test_an_idle_destination_is_woken_by_a_notification_naming_it_and_only_by_that():
    plan = schedule("crm", "mail")
    for _ in range(2):
        name, turn = plan.take()
        plan.done(name, turn, claimed=0)
    assert plan.due_now() == []
    plan.wake({"mail"})
    assert plan.due_now() == ["mail"]
    assert plan.take() == ("mail", Turn.DELIVER)
    plan.wake({""})  # a notification naming no destination is for every one
    assert plan.due_now() == ["crm"]


def test_an_idle_destination_polls_first_when_its_idle_time_is_over():
    plan = schedule("crm", idle_sleep=0.0)
    plan.done(*plan.take(), claimed=0)
    assert plan.take() == ("crm", Turn.POLL)


def test_a_wake_up_during_a_turn_brings_the_next_turn_at_once_even_if_it_claimed_nothing():
    plan = schedule("crm")
    name, turn = plan.take()
    plan.wake({"crm"})
    plan.done(name, turn, claimed=0)
    assert plan.take() == ("crm", Turn.DELIVER)


def test_a_batch_short_of_a_full_one_waits_for_a_wake_up_not_for_an_empty_claim():
    # Its claim found nothing more due: a claim at once would find nothing. A handoff committed since wakes it.
    plan = schedule("crm", full_batch=20)
    plan.wake({"crm"})  # this process hears wake-ups
    plan.done(*plan.take(), claimed=3)
    assert plan.due_now() == []
    plan.wake({"crm"})
    assert plan.take() == ("crm", Turn.DELIVER)


def test_a_batch_short_of_a_full_one_during_which_a_wake_up_came_is_followed_at_once():
    plan = schedule("crm", full_batch=20)
    name, turn = plan.take()
    plan.wake({"crm"})  # committed during the turn: perhaps after its claim
    plan.done(name, turn, claimed=3)
    assert plan.take() == ("crm", Turn.DELIVER)


def test_until_a_wake_up_is_heard_any_batch_that_claimed_is_followed_at_once():
    # SQLite, or a pooler that keeps no LISTEN: nothing would tell of a handoff committed after the claim.
    plan = schedule("crm", full_batch=20)
    plan.done(*plan.take(), claimed=1)
    assert plan.take() == ("crm", Turn.DELIVER)


def test_a_destination_held_by_its_limits_is_not_brought_forward_by_a_wake_up():
    plan = schedule("crm")
    plan.done(*plan.take(), wait_seconds=LONG)
    plan.wake({"crm"})
    assert plan.due_now() == []


def test_maintenance_is_a_turn_of_its_own_when_it_is_due():
    plan = schedule("crm", maintain_every=0.0)
    assert plan.take() == ("crm", Turn.MAINTAIN)


def test_a_destination_no_longer_served_gets_no_more_turns_once_its_turn_ends():
    plan = schedule("crm", "mail")
    name, turn = plan.take()
    plan.serve(["mail"] if name == "crm" else ["crm"])
    plan.done(name, turn, claimed=20)
    assert name not in plan.names()
    assert name not in plan.due_now()


def test_take_returns_nothing_once_stopped():
    plan = schedule("crm")
    plan.done(*plan.take(), claimed=0)
    taken = []
    worker = threading.Thread(target=lambda: taken.append(plan.take()))
    worker.start()
    plan.stop.set()
    plan.release_all()
    worker.join(timeout=30)
    assert not worker.is_alive() and taken == [None]


def test_a_wake_up_during_a_turn_gives_a_second_lane_a_delivery_turn_at_once():
    plan = schedule("crm", lanes=2)
    name, turn = plan.take()
    assert plan.due_now() == []  # a backlog alone does not open a second lane
    plan.wake({"crm"})
    assert plan.take() == ("crm", Turn.DELIVER)  # before the first turn is done
    plan.wake({"crm"})
    assert plan.due_now() == []  # both lanes are under way
    plan.done(name, turn, claimed=1)
    assert plan.due_now() == ["crm"]  # the wake-up that found no lane free: a lane at once


def test_with_one_lane_a_wake_up_during_a_turn_waits_for_the_turn_to_end():
    plan = schedule("crm", lanes=1)
    name, turn = plan.take()
    plan.wake({"crm"})
    assert plan.due_now() == []
    plan.done(name, turn, claimed=0)
    assert plan.take() == ("crm", Turn.DELIVER)


def test_a_destination_dropped_during_two_lanes_goes_once_both_have_ended():
    plan = schedule("crm", lanes=2)
    first = plan.take()
    plan.wake({"crm"})
    second = plan.take()
    plan.drop("crm")
    plan.done(*first, claimed=1)
    assert plan.names() == []
    plan.done(*second, claimed=1)
    assert plan.due_now() == [] and plan.names() == []


def test_maintenance_falls_due_during_a_delivery_lane_and_takes_the_other_lane():
    # Under a steady stream of wake-ups two lanes take turns and no moment finds both free: maintenance
    # (settling uncertain outcomes) must not wait for one.
    plan = schedule("crm", lanes=2, maintain_every=0.0)
    maintenance = plan.take()
    assert maintenance == ("crm", Turn.MAINTAIN)
    plan.wake({"crm"})
    delivery = plan.take()
    assert delivery == ("crm", Turn.DELIVER)
    plan.done(*maintenance)  # due again at once (maintain_every=0)
    assert plan.due_now() == ["crm"]
    assert plan.take() == ("crm", Turn.MAINTAIN)  # beside the delivery still under way
    assert plan.due_now() == []  # both lanes under way
    plan.done(*delivery, claimed=1)


def test_expired_leases_bring_maintenance_forward_for_an_idle_destination_and_beside_a_delivery():
    # A dead worker's rows are uncertain once the supervision expired their leases: they are asked about at
    # once, not a maintenance interval later (LONG here: never within the test).
    plan = schedule("crm", "mail", lanes=2)
    crm = plan.take()
    assert crm == ("crm", Turn.DELIVER)  # a delivery under way at crm
    plan.done(*plan.take(), claimed=0)  # mail idle
    assert plan.due_now() == []
    plan.settle_now()
    assert plan.due_now() == ["crm", "mail"]
    assert sorted([plan.take(), plan.take()]) == [("crm", Turn.MAINTAIN), ("mail", Turn.MAINTAIN)]
    plan.done("mail", Turn.MAINTAIN)
    plan.done("crm", Turn.MAINTAIN)
    assert plan.due_now() == []  # the next maintenance comes at its interval again


def test_leases_expired_during_a_maintenance_turn_bring_the_next_one_at_once():
    # The turn under way may have claimed before the expiry's last row became uncertain: it comes again at
    # once, not a maintenance interval later.
    plan = schedule("crm", maintain_every=0.0)
    turn = plan.take()
    assert turn == ("crm", Turn.MAINTAIN)
    plan.maintain_every = LONG
    plan.settle_now()
    plan.done(*turn)
    assert plan.take() == ("crm", Turn.DELIVER)  # due since it was served: first in line
    plan.done("crm", Turn.DELIVER, claimed=0)  # idle now, its next poll LONG away
    assert plan.due_now() == ["crm"]
    assert plan.take() == ("crm", Turn.MAINTAIN)
    plan.done("crm", Turn.MAINTAIN)
    assert plan.due_now() == []  # then at its interval again


def test_a_monotonic_clock_stepped_back_leaves_due_turns_due_and_the_rest_as_far_off(monkeypatch):
    """libfaketime steps the monotonic clock with the wall clock: a turn due before a step of five minutes back is
    due after it (not five minutes later: a dispatcher with a backlog stalled so), and maintenance keeps its
    distance."""
    clock = [1000.0]
    monkeypatch.setattr(serving, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    plan = schedule("crm", maintain_every=10.0)
    name, turn = plan.take()
    plan.done(name, turn, claimed=20)  # a backlog: its next turn at once
    clock[0] -= 300
    assert plan.due_now() == ["crm"]
    assert plan.take() == ("crm", Turn.DELIVER)
    plan.done("crm", Turn.DELIVER, wait_seconds=LONG)  # held by its limits: only maintenance comes
    clock[0] += 9
    assert plan.due_now() == []
    clock[0] += 1
    assert plan.take() == ("crm", Turn.MAINTAIN)
