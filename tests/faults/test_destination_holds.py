"""A destination's problem stays its own (issue 35, items 6 and 7): a real `manage.py dispatch` whose
environment lacks one destination's secret, with another destination whose own timeouts outlast the lease,
starts, delivers the seed's handoffs (counted at the receiver), and holds each broken one with its reason and
one incident, its handoffs pending and never attempted. Restarted with the secret, it releases that hold and
delivers its handoffs, and the incident resolves; the one whose calls would outlive the lease stays held.
PostgreSQL."""

import os
import signal

import pytest

from delivery.models import ReceiverTask
from incidents.models import Incident, IncidentKind, IncidentState
from incidents.services.incidents import incidents_sync
from outbox.models import (
    Attempt,
    DestinationConfig,
    DestinationHealth,
    DestinationState,
    Handoff,
    HandoffState,
    PauseReason,
)
from tests.factories import HandoffFactory
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
SEED, NO_SECRET, SLOW = "receiver", "acme-accounts", "slow-crm"
SECRET_ENV = "HANDOFF_DEST_ACME_ACCOUNTS_SECRET"
# The outside test's numbers: a 3 s lease; the seed's calls (1 + 1.5 s) fit in it, SLOW's (2 + 5 s) do not.
LEASE = "3"
EACH = 6
DEADLINE_SECONDS = 120


def _destinations(url: str) -> None:
    """Rows as an operator left them: acme's secret named (present where it was applied, not here)."""
    DestinationConfig.objects.create(
        name=NO_SECRET,
        kind="http",
        config={"url": url, "secret_env": SECRET_ENV, "connect_timeout": 1, "read_timeout": 1.5},
    )
    DestinationConfig.objects.create(
        name=SLOW, kind="http", config={"url": url, "connect_timeout": 2, "read_timeout": 5}
    )


def _handoffs() -> dict[str, list[str]]:
    keys = {}
    for offset, name in enumerate((SEED, NO_SECRET, SLOW)):
        keys[name] = [
            HandoffFactory(number=1000 * (offset + 1) + n, destination=name).action_key
            for n in range(EACH)
        ]
    return keys


def _at_receiver(keys: list[str]) -> int:
    return ReceiverTask.objects.filter(action_key__in=keys).count()


def _held(name: str) -> bool:
    return DestinationHealth.objects.filter(
        name=name, state=DestinationState.PAUSED, pause_reason=PauseReason.UNSERVABLE
    ).exists()


def _incidents(name: str):
    return Incident.objects.filter(destination=name, kind=IncidentKind.DESTINATION)


def test_a_destination_missing_its_secret_is_held_and_the_others_are_served(processes):
    _destinations(processes.start_receiver())
    keys = _handoffs()
    assert SECRET_ENV not in os.environ
    first = processes.start_dispatcher("d1", HANDOFF_LEASE_SECONDS=LEASE)

    wait_until(
        lambda: _at_receiver(keys[SEED]) == EACH and _held(NO_SECRET) and _held(SLOW),
        timeout=DEADLINE_SECONDS,
        what="the seed's handoffs delivered and both broken destinations held",
        procs=[first],
    )
    assert first.poll() is None, "the dispatcher started and keeps serving"
    log = first.log_path.read_text()
    assert f"not serving {NO_SECRET} (held, its handoffs wait)" in log
    reason = DestinationHealth.objects.get(name=NO_SECRET).last_error
    assert reason.startswith(f"destination {NO_SECRET!r}") and f"{SECRET_ENV} is not set" in reason
    slow = DestinationHealth.objects.get(name=SLOW).last_error
    assert slow.startswith(f"destination {SLOW!r}: read_timeout: one call may take")
    assert "= 7 s, not less than the lease (HANDOFF_LEASE_SECONDS=3 s)" in slow
    # Their handoffs wait: never attempted, nothing at the receiver, nobody asked to act.
    for name in (NO_SECRET, SLOW):
        assert set(Handoff.objects.filter(destination=name).values_list("state", flat=True)) == {
            S.PENDING
        }
        assert not Attempt.objects.filter(handoff__destination=name).exists()
        assert _at_receiver(keys[name]) == 0
    # One incident each, however often the alert sweep looks.
    incidents_sync()
    incidents_sync()
    assert _incidents(NO_SECRET).count() == 1
    incident = _incidents(NO_SECRET).get()
    assert (incident.state, incident.member_count) == (IncidentState.OPEN, EACH)
    assert f"{SECRET_ENV} is not set" in incident.title
    assert _incidents(SLOW).count() == 1
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 0

    # Restarted with the secret (the receiver's own, which it verifies): the hold ends, acme drains.
    second = processes.start_dispatcher(
        "d2", HANDOFF_LEASE_SECONDS=LEASE, **{SECRET_ENV: os.environ["RECEIVER_SIGNING_SECRET"]}
    )
    wait_until(
        lambda: Handoff.objects.filter(destination=NO_SECRET, state=S.DELIVERED).count() == EACH,
        timeout=DEADLINE_SECONDS,
        what="acme's handoffs delivered once its secret is there",
        procs=[second],
    )
    assert _at_receiver(keys[NO_SECRET]) == EACH
    health = DestinationHealth.objects.get(name=NO_SECRET)
    assert (health.state, health.pause_reason, health.last_error) == (
        DestinationState.ACTIVE,
        "",
        "",
    )
    incidents_sync()
    assert _incidents(NO_SECRET).get().state == IncidentState.RESOLVED
    # The one whose calls would outlive the lease is still held, still one incident.
    assert _held(SLOW) and _at_receiver(keys[SLOW]) == 0
    assert _incidents(SLOW).exclude(state=IncidentState.RESOLVED).count() == 1
    processes.stop_all()
