"""A credential hold follows refusals that persist, not one answer (issue 36, item 7). One node of a receiver
behind a load balancer with a stale secret answers 401 to 1 % of calls: the destination keeps delivering,
never paused, every handoff delivered once. A sender whose secret the receiver refuses on every call is
paused for its credentials after HANDOFF_BREAKER_CREDENTIAL_THRESHOLD refusals in a row, its handoffs waiting
(none needs a person). Real receiver and dispatcher processes, the production threshold. PostgreSQL."""

import base64

import pytest

from delivery.models import FiredFault, ReceiverTask
from outbox.models import (
    Attempt,
    DestinationEvent,
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
NAME = "receiver"
# The production default (config/settings): the test suite's own settings pause on one refusal.
THRESHOLD = "3"
DEADLINE_SECONDS = 180


def _paused_events():
    return DestinationEvent.objects.filter(destination=NAME, to_state=DestinationState.PAUSED)


def test_one_percent_of_calls_refused_keeps_the_destination_delivering_unpaused(processes):
    keys = [HandoffFactory(number=5000 + n, destination=NAME).action_key for n in range(300)]
    # 1 %: three keys far apart in the claim order, each refused once (a fault fires once per key).
    refused = [keys[40], keys[150], keys[260]]
    processes.start_receiver(faults={"keys": dict.fromkeys(refused, "http_401")})
    dispatcher = processes.start_dispatcher("d1", HANDOFF_BREAKER_CREDENTIAL_THRESHOLD=THRESHOLD)
    wait_until(
        lambda: Handoff.objects.filter(state=S.DELIVERED).count() == len(keys),
        timeout=DEADLINE_SECONDS,
        what="every handoff delivered",
        procs=[dispatcher],
    )
    # The refusals happened, and the destination never stopped for them.
    assert set(FiredFault.objects.values_list("action_key", "kind")) == {
        (key, "http_401") for key in refused
    }
    assert not _paused_events().exists()
    health = DestinationHealth.objects.get(name=NAME)
    assert (health.state, health.pause_reason) == (DestinationState.ACTIVE, "")
    # Every handoff delivered once at the receiver; only the refused ones needed a second call.
    assert ReceiverTask.objects.filter(action_key__in=keys).count() == len(keys)
    assert sorted(
        Handoff.objects.filter(action_key__in=refused).values_list("attempts", flat=True)
    ) == [2, 2, 2]
    assert Attempt.objects.filter(reason_code="credential_rejected").count() == len(refused)
    processes.stop_all()


def test_every_call_refused_holds_the_destination_for_its_credentials(processes):
    keys = [HandoffFactory(number=6000 + n, destination=NAME).action_key for n in range(20)]
    processes.start_receiver()
    stale = "whsec_" + base64.b64encode(b"a stale secret, 32 bytes long!!!").decode()
    dispatcher = processes.start_dispatcher(
        "d1",
        HANDOFF_BREAKER_CREDENTIAL_THRESHOLD=THRESHOLD,
        RECEIVER_SIGNING_SECRET=stale,
        # No probe within the test: the refusals counted are the ones that paused it.
        HANDOFF_BREAKER_PROBE_BASE="600",
        HANDOFF_BREAKER_PROBE_CAP="600",
    )
    wait_until(
        lambda: (
            DestinationHealth.objects.filter(
                name=NAME, state=DestinationState.PAUSED, pause_reason=PauseReason.CREDENTIAL
            ).exists()
            and not Handoff.objects.filter(state=S.IN_FLIGHT).exists()
        ),
        timeout=DEADLINE_SECONDS,
        what="the destination held for its credentials, the claims not sent given back",
        procs=[dispatcher],
    )
    [event] = _paused_events()
    assert event.reason.startswith(f"{THRESHOLD} consecutive failure(s): credential_rejected")
    # Refusals that persist, not the first: the threshold's calls, then nothing more is sent.
    assert Attempt.objects.filter(reason_code="credential_rejected").count() == int(THRESHOLD)
    assert ReceiverTask.objects.filter(action_key__in=keys).count() == 0
    # Its handoffs wait for the credential to be fixed; none is handed to a person.
    assert set(Handoff.objects.values_list("state", flat=True)) == {S.PENDING}
    processes.stop_all()
