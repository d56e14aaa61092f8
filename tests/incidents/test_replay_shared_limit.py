"""Two replay previews share their destination's limits (a slot of its concurrency limit, on PostgreSQL, taken
by the other preview's lookup in a thread and connection of its own): a preview whose lookups the shared limit
refuses for its whole wait asked nothing, and its items say "not asked" and what refused them, not that the
destination did not answer. Once the slot is free a preview asks and learns the answers."""

import threading

import pytest
from django.db import connections
from django.db.models.functions import Now
from django.test import Client

from delivery.models import ReceiverTask
from incidents.models import Incident, Replay, ReplayState, ReplayVerdict
from incidents.services import replay_preview
from incidents.services.incidents import incidents_sync
from incidents.services.replay_preview import replay_preview_run
from outbox.models import DestinationHealth, Handoff, HandoffState
from outbox.services.breaker import destination_health_get_or_create
from outbox.services.limits import destination_acquire, destination_release
from tests.builders import record

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
IN_FLIGHT = "not asked: destination receiver has 1 call(s) in flight"


class OtherPreview(threading.Thread):
    """Another preview's lookup in flight: the destination's one concurrency slot, taken as `LimitedLookups`
    takes it, in this thread's own connection, until `done`."""

    def __init__(self):
        super().__init__(daemon=True)
        self.taken, self.done = threading.Event(), threading.Event()

    def run(self):
        try:
            permit = destination_acquire(
                name="receiver", worker="replay preview", requests=1, lease_seconds=60
            )
            self.taken.set()
            self.done.wait(60)
            destination_release(permit=permit)
        finally:
            connections.close_all()


def started_replay(world) -> Replay:
    handoffs = [record(n) for n in range(60, 63)]
    Handoff.objects.filter(pk__in=[h.pk for h in handoffs]).update(
        state=HandoffState.NEEDS_ATTENTION,
        failure_class="transient",
        reason_code="retries_exhausted",
        attention_since=Now(),
    )
    ReceiverTask.objects.using("delivery").create(
        action_key=handoffs[0].action_key,
        payload=handoffs[0].payload,
        payload_hash=handoffs[0].payload_hash,
    )
    incidents_sync()
    olga = Client()
    olga.force_login(world["olga"])
    assert olga.post(f"/incidents/{Incident.objects.get().pk}/replay").status_code == 302
    return Replay.objects.get()


def test_a_preview_refused_by_a_limit_another_preview_holds_says_not_asked(
    world, settings, monkeypatch
):
    settings.ALERT_EMAILS = []
    monkeypatch.setattr(replay_preview, "LOOKUP_WAIT_SECONDS", 1.0)
    destination_health_get_or_create("receiver")
    DestinationHealth.objects.filter(name="receiver").update(
        max_concurrency=1, max_requests_per_second=None
    )
    replay = started_replay(world)
    other = OtherPreview()
    other.start()
    try:
        assert other.taken.wait(30)
        refused = replay_preview_run(replay_id=replay.pk)
    finally:
        other.done.set()
        other.join(30)
    assert refused.verdicts == {ReplayVerdict.CANNOT_ASK: 3}
    notes = set(refused.items.values_list("note", flat=True))
    assert notes == {IN_FLIGHT}, notes

    # The slot given back, the next preview asks: one key there, two missing.
    replay.items.update(verdict="", note="")
    Replay.objects.filter(pk=replay.pk).update(state=ReplayState.PREVIEWING)
    asked = replay_preview_run(replay_id=replay.pk)
    assert asked.verdicts == {ReplayVerdict.PRESENT: 1, ReplayVerdict.MISSING: 2}
