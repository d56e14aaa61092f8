"""The breaker's pause is its hold, not its old columns (issue 36; docs/operations.md, "Rolling deploys": the
breaker's own columns, release one). `DestinationHealth.state`, `pause_reason` and `paused_at` are written
for the previous release's dispatchers and read by nothing: a real `manage.py dispatch` and every screen,
cause and incident follow the breaker's live `DestinationHold` row, whatever the columns say. PostgreSQL,
the bundled receiver under gunicorn; each key's tasks counted at the receiver."""

import pytest

from delivery.models import ReceiverTask
from incidents.causes import destination_causes, paused_destinations
from incidents.models import Incident, IncidentKind, IncidentState
from incidents.services.incidents import incidents_sync
from outbox.clock import db_now
from outbox.models import (
    Attempt,
    DestinationHealth,
    DestinationHold,
    DestinationState,
    Handoff,
    HandoffState,
)
from outbox.selectors import destination_summaries
from outbox.services.destination_configs import destination_configs_apply
from tests.factories import HandoffFactory, pause_by_breaker, paused_by_breaker
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
HELD, OTHER = "receiver", "crm"  # both the bundled receiver; `crm` is a row of the http kind
PER_DESTINATION = 5
# Far enough that no probe falls due while a test runs, unless the test moves it.
PROBE_IN_SECONDS = 3600
DEADLINE_SECONDS = 120


@pytest.fixture
def receiver(processes):
    url = processes.start_receiver()
    destination_configs_apply(
        document={
            "destinations": [
                {
                    "name": OTHER,
                    "kind": "http",
                    "url": url,
                    "connect_timeout": 1.0,
                    "read_timeout": 5,
                }
            ]
        },
        actor_label="fault test",
    )
    return url


def handoffs_to(destination: str, first: int) -> list[Handoff]:
    return [
        HandoffFactory(number=first + n, destination=destination) for n in range(PER_DESTINATION)
    ]


def delivered(handoffs: list[Handoff]) -> bool:
    pks = [h.pk for h in handoffs]
    return Handoff.objects.filter(pk__in=pks, state=S.DELIVERED).count() == len(pks)


def assert_one_task_each(handoffs: list[Handoff]) -> None:
    keys = [h.action_key for h in handoffs]
    tasks = list(
        ReceiverTask.objects.filter(action_key__in=keys).values_list("action_key", flat=True)
    )
    assert sorted(tasks) == sorted(keys), "exactly one task per key at the receiver"


def state_kind(name: str) -> str:
    """The Destinations page's state, as its claim `destination.state` says it."""
    [summary] = destination_summaries([name], [7])
    return summary.state_kind


def destination_incidents(name: str):
    return Incident.objects.filter(kind=IncidentKind.DESTINATION, destination=name)


def test_a_pause_whose_hold_was_ended_is_active_everywhere_though_its_column_says_paused(
    processes, receiver
):
    pause_by_breaker(HELD, next_probe_in=PROBE_IN_SECONDS)
    # The hold ends (as a probe's success or a person would end it); the old column is left saying paused.
    DestinationHold.objects.of_breaker().filter(destination=HELD).update(
        ended_at=db_now(), ended_by="the test"
    )
    assert DestinationHealth.objects.get(name=HELD).state == DestinationState.PAUSED

    assert not paused_by_breaker(HELD)
    assert state_kind(HELD) == "active"
    assert HELD not in [h.name for h in paused_destinations()], "Health's paused notice"
    assert not DestinationHealth.objects.held_back().filter(name=HELD).exists()
    assert not [c for c in destination_causes() if c.cause.startswith(f"destination:{HELD}:")]
    incidents_sync()
    assert not destination_incidents(HELD).exists()

    handoffs = handoffs_to(HELD, 8100)
    dispatcher = processes.start_dispatcher("d1")
    wait_until(
        lambda: delivered(handoffs),
        timeout=DEADLINE_SECONDS,
        what="the handoffs of the destination whose pause ended to be delivered",
        procs=[dispatcher],
    )
    assert dispatcher.poll() is None
    assert_one_task_each(handoffs)
    assert {h.attempts_made for h in Handoff.objects.filter(pk__in=[h.pk for h in handoffs])} == {1}
    # The breaker's write after the deliveries (its own statement, after theirs) makes the old column agree
    # with the holds again.
    wait_until(
        lambda: DestinationHealth.objects.filter(name=HELD, state=DestinationState.ACTIVE).exists(),
        timeout=DEADLINE_SECONDS,
        what="the breaker to write the old column as the holds say",
        procs=[dispatcher],
    )


def test_a_live_breaker_hold_under_an_active_column_holds_the_destination_everywhere(
    processes, receiver
):
    pause_by_breaker(HELD, next_probe_in=PROBE_IN_SECONDS)
    # A stale column: the hold is live, the old column says active.
    DestinationHealth.objects.filter(name=HELD).update(
        state=DestinationState.ACTIVE, pause_reason="", paused_at=None
    )

    assert paused_by_breaker(HELD, "unreachable")
    assert state_kind(HELD) == "breaker"
    assert HELD in [h.name for h in paused_destinations()], "Health's paused notice"
    assert DestinationHealth.objects.held_back().filter(name=HELD).exists()
    assert [c.cause for c in destination_causes()] == [f"destination:{HELD}:unreachable"]
    held = handoffs_to(HELD, 8200)
    incidents_sync()
    [incident] = destination_incidents(HELD)
    assert incident.failure_class == "unreachable"

    # The dispatcher serves the other destination, twice over, and sends nothing to the held one.
    dispatcher = processes.start_dispatcher("d1")
    others: list[Handoff] = []
    # A second batch once the first is in: the dispatcher has gone round its destinations again.
    for first in (8300, 8400):
        batch = handoffs_to(OTHER, first)
        wait_until(
            lambda batch=batch: delivered(batch),
            timeout=DEADLINE_SECONDS,
            what="the other destination's handoffs to be delivered",
            procs=[dispatcher],
        )
        others += batch
    assert_one_task_each(others)
    assert not ReceiverTask.objects.filter(action_key__in=[h.action_key for h in held]).exists()
    assert not Attempt.objects.filter(handoff__in=held).exists()
    assert set(
        Handoff.objects.filter(pk__in=[h.pk for h in held]).values_list("state", flat=True)
    ) == {S.PENDING}
    assert DestinationHealth.objects.get(name=HELD).probes == 0, "no probe before it is due"

    # Its probe falls due: one call, which succeeds, ends the hold; the held handoffs go, once each.
    DestinationHealth.objects.filter(name=HELD).update(next_probe_at=db_now())
    wait_until(
        lambda: delivered(held),
        timeout=DEADLINE_SECONDS,
        what="the held handoffs to be delivered after the probe succeeded",
        procs=[dispatcher],
    )
    assert_one_task_each(held)
    assert not paused_by_breaker(HELD)
    assert DestinationHold.objects.filter(
        destination=HELD, ended_by__startswith="the breaker"
    ).exists()
    assert state_kind(HELD) == "active"
    incidents_sync()
    assert not destination_incidents(HELD).filter(state=IncidentState.OPEN).exists()
