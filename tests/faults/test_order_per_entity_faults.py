"""Order per business entity with real processes (issue 39): two `manage.py dispatch` and the receiver under
gunicorn, whose first call for the first client's first action fails (its fault switch, once for that key).
The two actions for one client reach the receiver in approval order, the retried first one keeping its
place; another client's action is not held up behind them. PostgreSQL."""

import pytest

from approvals.services.rule_versions import rule_version_publish
from delivery.models import ReceiverTask
from outbox.models import Handoff, HandoffState
from outbox.services.operator import handoff_retry
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, onboarding_world
from tests.faults.test_dispatch_faults import wait_until
from tests.outbox.services.test_order_per_entity import ORDERED, SCHEMA

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
DEADLINE_SECONDS = 120


def _approve(world, number: int, client: str) -> Handoff:
    return approve(world, number, payload={**ONBOARDING_PAYLOAD, "client_id": client})


def _delivered(handoff: Handoff) -> bool:
    return Handoff.objects.filter(pk=handoff.pk, state=S.DELIVERED).exists()


def test_one_client_s_actions_arrive_in_approval_order_across_a_retry_others_go_on(processes):
    world = onboarding_world()
    rule_version_publish(workflow="onboarding", schema=SCHEMA, steps=ORDERED, actor=None)
    first, second = _approve(world, 71, "acme"), _approve(world, 70, "acme")
    other = _approve(world, 72, "globex")
    processes.start_receiver(faults={"keys": {first.action_key: "http_503"}})
    # A long backoff: the first one waits after its failed call, unless an operator runs it now.
    slow = {"HANDOFF_BACKOFF_BASE": "600", "HANDOFF_BACKOFF_CAP": "600"}
    dispatchers = [processes.start_dispatcher(name, **slow) for name in ("d1", "d2")]

    wait_until(
        lambda: _delivered(other) and Handoff.objects.get(pk=first.pk).attempts >= 1,
        timeout=DEADLINE_SECONDS,
        what="the other client's action delivered and the first one's call failed",
        procs=dispatchers,
    )
    if not _delivered(first):  # its backoff's jitter may be short: then it went already
        assert not _delivered(second), "the second went before the first"
        assert not ReceiverTask.objects.filter(action_key=second.action_key).exists()
        handoff_retry(handoff_id=first.pk, actor=world["olga"], reason="receiver fixed")
    wait_until(
        lambda: _delivered(first) and _delivered(second),
        timeout=DEADLINE_SECONDS,
        what="both of the client's actions delivered",
        procs=dispatchers,
    )
    arrived = list(
        ReceiverTask.objects.filter(action_key__in=[first.action_key, second.action_key])
        .order_by("pk")
        .values_list("action_key", flat=True)
    )
    assert arrived == [first.action_key, second.action_key]
    assert Handoff.objects.get(pk=first.pk).attempts == 2  # retried under its key, in its place
    assert Handoff.objects.get(pk=second.pk).attempts == 1
    processes.stop_all()
