"""Holds overlap (issue 36, item 1): olga pauses the accounts destination, then schedules a window that
starts during the pause. A real `manage.py dispatch` serves another destination beside it throughout (its
handoffs delivered, counted at the receiver: proof that the dispatcher is serving while it sends nothing to
the held one). The window is a second hold: scheduling it ends nothing, ending the pause leaves the window
holding, and only when the window too is over are the held handoffs sent, each with one attempt.
PostgreSQL."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import ReceiverTask
from outbox.clock import db_now_plus
from outbox.hold_lines import destination_holds_now
from outbox.models import (
    Attempt,
    DestinationConfig,
    DestinationHold,
    Handoff,
    HandoffState,
    HoldKind,
)
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_resume_by_operator,
    destination_schedule_window,
)
from tests.factories import HandoffFactory, make_user
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
HELD, OTHER = "receiver", "other-crm"
EACH = 4
DEADLINE_SECONDS = 120


def _handoffs(name: str, first: int) -> list[str]:
    return [HandoffFactory(number=first + n, destination=name).action_key for n in range(EACH)]


def _at_receiver(keys: list[str]) -> int:
    return ReceiverTask.objects.filter(action_key__in=keys).count()


def _served_meanwhile(first: int, procs) -> None:
    """New handoffs of the other destination are delivered: the dispatcher has served a round since."""
    keys = _handoffs(OTHER, first)
    wait_until(
        lambda: _at_receiver(keys) == EACH,
        timeout=DEADLINE_SECONDS,
        what=f"{OTHER}'s handoffs {first}… delivered",
        procs=procs,
    )


def _nothing_sent(keys: list[str]) -> None:
    assert _at_receiver(keys) == 0
    assert not Attempt.objects.filter(handoff__action_key__in=keys).exists()
    assert set(Handoff.objects.filter(action_key__in=keys).values_list("state", flat=True)) == {
        HandoffState.PENDING
    }


def test_a_window_scheduled_during_a_pause_spends_nothing_and_neither_ends_the_other(processes):
    url = processes.start_receiver()
    DestinationConfig.objects.create(name=OTHER, kind="http", config={"url": url})
    olga = make_user("olga")
    held = _handoffs(HELD, 1000)
    pause = destination_pause_by_operator(name=HELD, actor=olga, reason="accounts migration")
    dispatcher = processes.start_dispatcher("d1")
    _served_meanwhile(2000, [dispatcher])
    _nothing_sent(held)

    # The window is scheduled while the pause is on, to start later: the pause stays.
    now = timezone.now()
    window = destination_schedule_window(
        name=HELD,
        actor=olga,
        reason="database maintenance",
        starts_at=now + timedelta(minutes=27),
        ends_at=now + timedelta(hours=1),
    )
    holds = destination_holds_now(HELD)
    assert [line.hold_id for line in holds.live] == [pause.pk]
    assert holds.next_scheduled.hold_id == window.pk
    _served_meanwhile(3000, [dispatcher])
    _nothing_sent(held)

    # The window's start comes (moved into the database's past) while the pause is on; the pause ends: the
    # window still holds the destination.
    DestinationHold.objects.filter(pk=window.pk).update(starts_at=db_now_plus(-1))
    destination_resume_by_operator(name=HELD, actor=olga, reason="migration done")
    assert [line.kind for line in destination_holds_now(HELD).live] == [HoldKind.WINDOW.label]
    _served_meanwhile(4000, [dispatcher])
    _nothing_sent(held)
    assert DestinationHold.objects.get(pk=pause.pk).ended_by == "olga"
    assert DestinationHold.objects.get(pk=window.pk).ended_at is None

    # The window's end passes: nothing holds it, its handoffs are sent, once each.
    DestinationHold.objects.filter(pk=window.pk).update(ends_at=db_now_plus(-0.001))
    wait_until(
        lambda: (
            _at_receiver(held) == EACH
            and Handoff.objects.filter(action_key__in=held, state=HandoffState.DELIVERED).count()
            == EACH
        ),
        timeout=DEADLINE_SECONDS,
        what="the held handoffs delivered once no hold is live",
        procs=[dispatcher],
    )
    assert (
        list(Handoff.objects.filter(action_key__in=held).values_list("attempts", flat=True))
        == [1] * EACH
    )
    assert not destination_holds_now(HELD).live
    processes.stop_all()


def _sent_to(keys: list[str]) -> int:
    return Attempt.objects.filter(handoff__action_key__in=keys).count()


def test_a_retry_after_hold_during_an_operators_pause_expires_and_leaves_the_pause(processes):
    """The receiver answers one call 429 with Retry-After 600 s: the system's Retry-After hold. olga pauses
    the destination while it is live: two holds. The Retry-After's end passes: the pause still holds and
    nothing more is sent. olga resumes: the handoffs are sent, each delivered once."""
    held = _handoffs(HELD, 5000)
    url = processes.start_receiver(faults={"keys": {held[0]: "http_429"}, "retry_after": 600})
    DestinationConfig.objects.create(name=OTHER, kind="http", config={"url": url})
    olga = make_user("olga")
    dispatcher = processes.start_dispatcher("d1")
    wait_until(
        lambda: (
            DestinationHold.objects.live()
            .filter(destination=HELD, kind=HoldKind.RETRY_AFTER)
            .exists()
        ),
        timeout=DEADLINE_SECONDS,
        what="the 429 answer's Retry-After hold",
        procs=[dispatcher],
    )
    destination_pause_by_operator(name=HELD, actor=olga, reason="accounts migration")
    kinds = [line.kind for line in destination_holds_now(HELD).live]
    assert sorted(kinds) == sorted([HoldKind.RETRY_AFTER.label, HoldKind.OPERATOR_PAUSE.label])
    calls = _sent_to(held)

    # The Retry-After's end passes (and with it the refused handoff's own retry time): it is over, the
    # pause is not, and nothing more is sent.
    DestinationHold.objects.filter(destination=HELD, kind=HoldKind.RETRY_AFTER).update(
        ends_at=db_now_plus(-0.001)
    )
    Handoff.objects.filter(action_key__in=held, state=HandoffState.PENDING).update(
        next_attempt_at=db_now_plus(-0.001)
    )
    assert [line.kind for line in destination_holds_now(HELD).live] == [
        HoldKind.OPERATOR_PAUSE.label
    ]
    _served_meanwhile(6000, [dispatcher])
    assert _sent_to(held) == calls

    destination_resume_by_operator(name=HELD, actor=olga, reason="migration done")
    wait_until(
        lambda: (
            Handoff.objects.filter(action_key__in=held, state=HandoffState.DELIVERED).count()
            == EACH
        ),
        timeout=DEADLINE_SECONDS,
        what="the held handoffs delivered once no hold is live",
        procs=[dispatcher],
    )
    assert _at_receiver(held) == EACH
    # Nothing was sent while the pause held: the calls after the resume are the ones that delivered.
    assert _sent_to(held) > calls
    processes.stop_all()


def test_a_breaker_pause_ended_by_its_probe_leaves_a_window_scheduled_during_it(processes):
    """The receiver is down: the breaker pauses the destination (a hold until a probe succeeds). olga
    schedules a window during the pause, to start later. The receiver comes back: the probe ends the
    breaker's hold only; the window stays scheduled, then holds when its start comes, and the handoffs made
    meanwhile are sent only after its end."""
    url = processes.start_receiver()
    DestinationConfig.objects.create(name=OTHER, kind="http", config={"url": url})
    port = processes.stop_receiver()
    olga = make_user("olga")
    first = _handoffs(HELD, 7000)
    dispatcher = processes.start_dispatcher(
        "d1",
        HANDOFF_BREAKER_THRESHOLD="2",
        HANDOFF_BREAKER_PROBE_BASE="0.2",
        HANDOFF_BREAKER_PROBE_CAP="0.5",
        HANDOFF_BREAKER_QUICK_PROBE_CAP="0.5",
    )
    breaker = DestinationHold.objects.filter(destination=HELD, kind=HoldKind.BREAKER)
    wait_until(
        lambda: breaker.filter(ended_at__isnull=True, until_probe=True).exists(),
        timeout=DEADLINE_SECONDS,
        what="the breaker's pause, a hold until a probe succeeds",
        procs=[dispatcher],
    )
    now = timezone.now()
    window = destination_schedule_window(
        name=HELD,
        actor=olga,
        reason="database maintenance",
        starts_at=now + timedelta(minutes=27),
        ends_at=now + timedelta(hours=1),
    )
    assert breaker.get().ended_at is None

    processes.start_receiver(port=port)
    wait_until(
        lambda: (
            Handoff.objects.filter(action_key__in=first, state=HandoffState.DELIVERED).count()
            == EACH
        ),
        timeout=DEADLINE_SECONDS,
        what="the first handoffs delivered once a probe succeeded",
        procs=[dispatcher],
    )
    assert breaker.get().ended_by.startswith("the breaker")
    window.refresh_from_db()
    assert window.ended_at is None
    assert destination_holds_now(HELD).next_scheduled.hold_id == window.pk

    # The window's start comes: it holds, the breaker's end notwithstanding.
    DestinationHold.objects.filter(pk=window.pk).update(starts_at=db_now_plus(-1))
    later = _handoffs(HELD, 8000)
    _served_meanwhile(9000, [dispatcher])
    _nothing_sent(later)
    DestinationHold.objects.filter(pk=window.pk).update(ends_at=db_now_plus(-0.001))
    wait_until(
        lambda: (
            Handoff.objects.filter(action_key__in=later, state=HandoffState.DELIVERED).count()
            == EACH
        ),
        timeout=DEADLINE_SECONDS,
        what="the later handoffs delivered once the window is over",
        procs=[dispatcher],
    )
    assert _at_receiver(first + later) == 2 * EACH
    processes.stop_all()
