"""A credential hold follows refusals that persist, not one answer (issue 36, item 7). One node of a receiver
behind a load balancer with a stale secret answers 401 to 1 % of calls: the destination keeps delivering,
never paused, every handoff delivered once. A sender whose secret the receiver refuses on every call is
paused for its credentials after HANDOFF_BREAKER_CREDENTIAL_THRESHOLD refusals in a row, its handoffs waiting
(none needs a person). One node of two with a stale secret (30 % of calls refused, never three in a row)
holds it too: refusals over a share of the recent calls (HANDOFF_BREAKER_CREDENTIAL_SHARE). Real receiver and
dispatcher processes, the production threshold and share. PostgreSQL."""

import base64

import pytest

from delivery.models import FiredFault, ReceiverTask
from outbox.models import (
    Attempt,
    DestinationEvent,
    DestinationHealth,
    DestinationHold,
    DestinationState,
    Handoff,
    HandoffState,
    HoldKind,
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
    # Zero holds, so no handoff was delayed by one; the rate as counts: handoffs delivered per call made is
    # at least 0.9 of the one per call the destination gives without the refusals.
    assert not DestinationHold.objects.exists()
    assert len(keys) / Attempt.objects.count() >= 0.9
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
    [hold] = DestinationHold.objects.filter(destination=NAME)
    assert (hold.kind, hold.until_probe, hold.ended_at, hold.set_by) == (
        HoldKind.CREDENTIAL,
        True,
        None,
        "the breaker",
    )
    # Refusals that persist, not the first: the threshold's calls, then nothing more is sent.
    assert Attempt.objects.filter(reason_code="credential_rejected").count() == int(THRESHOLD)
    assert ReceiverTask.objects.filter(action_key__in=keys).count() == 0
    # Its handoffs wait for the credential to be fixed; none is handed to a person.
    assert set(Handoff.objects.values_list("state", flat=True)) == {S.PENDING}
    processes.stop_all()


def test_a_sustained_thirty_percent_share_of_refusals_holds_it_though_never_three_in_a_row(
    processes,
):
    keys = [HandoffFactory(number=8000 + n, destination=NAME).action_key for n in range(300)]
    # 3 keys in every 10, never two next to each other in the claim order: each refused once.
    refused = [key for n, key in enumerate(keys) if n % 10 in (0, 3, 6)]
    processes.start_receiver(faults={"keys": dict.fromkeys(refused, "http_401")})
    dispatcher = processes.start_dispatcher(
        "d1",
        HANDOFF_BREAKER_CREDENTIAL_THRESHOLD=THRESHOLD,
        HANDOFF_BREAKER_PROBE_BASE="600",
        HANDOFF_BREAKER_PROBE_CAP="600",
    )
    holds = DestinationHold.objects.filter(destination=NAME, kind=HoldKind.CREDENTIAL)
    wait_until(
        lambda: (
            holds.filter(ended_at__isnull=True).exists()
            and not Handoff.objects.filter(state=S.IN_FLIGHT).exists()
        ),
        timeout=DEADLINE_SECONDS,
        what="the destination held for its credentials by the share of refusals",
        procs=[dispatcher],
    )
    [hold] = holds
    assert "of the last" in hold.reason and "refused credentials" in hold.reason, hold.reason
    # Never three refusals in a row among the calls made, in the order they were made.
    answers = Attempt.objects.order_by("started_at", "pk").values_list("failure_class", flat=True)
    run = most = 0
    for failure_class in answers:
        run = run + 1 if failure_class == "credential" else 0
        most = max(most, run)
    assert most < int(THRESHOLD)
    # Held early: most handoffs wait for the credential to be fixed, none is handed to a person.
    assert ReceiverTask.objects.filter(action_key__in=keys).count() < len(keys) // 2
    assert not Handoff.objects.filter(state=S.NEEDS_ATTENTION).exists()
    processes.stop_all()
