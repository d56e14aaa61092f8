"""A replay from the console, on both backends: an operator previews a replay of an incident's members (the
preview, a background job, asks the receiver about each key), confirms it, and exports the per-item result
list; people of other workspaces or roles can neither start nor see it; a filter of the handoff list starts
one too. The scale and the receiver as a real process are `test_replay_at_scale.py`'s."""

import csv
import io

import pytest
from django.db.models.functions import Now
from django.test import Client

from approvals.models import Role
from delivery.models import ReceiverTask
from incidents.models import Incident, Replay, ReplayOutcome, ReplayState, ReplayVerdict
from incidents.services.incidents import incidents_sync
from incidents.services.replay_preview import replay_preview_run
from incidents.services.replay_run import replay_run
from outbox.models import Handoff, HandoffState
from outbox.services.case_holds import case_hold
from tests.builders import record
from tests.factories import make_user, retry_after_hold

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def failed(world, settings):
    """Five handoffs of workspace 7 whose retries ran out; the receiver holds the first two."""
    settings.ALERT_EMAILS = []
    handoffs = [record(n) for n in range(60, 65)]
    Handoff.objects.filter(pk__in=[h.pk for h in handoffs]).update(
        state=HandoffState.NEEDS_ATTENTION,
        failure_class="transient",
        reason_code="retries_exhausted",
        attention_since=Now(),
    )
    for h in handoffs[:2]:
        ReceiverTask.objects.using("delivery").create(
            action_key=h.action_key, payload=h.payload, payload_hash=h.payload_hash
        )
    incidents_sync()
    return handoffs


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_operator_previews_confirms_and_exports_an_incident_replay(world, failed):
    incident = Incident.objects.get()
    olga = client_of(world["olga"])
    replay = previewed(olga, incident)
    assert olga.post(f"/incidents/replays/{replay.pk}/run").status_code == 302
    assert olga.post(f"/incidents/replays/{replay.pk}/run").status_code == 409, "run once"
    replay = replay_run(replay_id=replay.pk)
    assert replay.state == ReplayState.DONE
    assert replay.outcomes == {ReplayOutcome.SETTLED: 2, ReplayOutcome.SENT: 3}
    states = dict(Handoff.objects.values_list("pk", "state"))
    assert [states[h.pk] for h in failed] == ["delivered"] * 2 + ["pending"] * 3
    assert incident.events.filter(action="replay_started", actor=world["olga"]).exists()
    assert Handoff.objects.get(pk=failed[0].pk).events.filter(actor=world["olga"]).exists()
    assert [r["result"] for r in exported_rows(olga, replay)] == [
        "settled by lookup, not sent"
    ] * 2 + ["sent again with the same key"] * 3


def previewed(olga: Client, incident: Incident) -> Replay:
    """The replay olga starts from the incident's page, after its preview ran (as the worker runs it)."""
    started = olga.post(f"/incidents/{incident.pk}/replay")
    assert started.status_code == 302
    waiting = olga.get(started["Location"]).content.decode()
    assert "Asking the destinations" in waiting and 'hx-trigger="every 1s"' in waiting
    replay = replay_preview_run(replay_id=Replay.objects.get().pk)
    assert replay.verdicts == {ReplayVerdict.PRESENT: 2, ReplayVerdict.MISSING: 3}
    assert ReceiverTask.objects.using("delivery").count() == 2, "a preview only reads"
    assert 'id="run-replay"' in olga.get(started["Location"]).content.decode()
    return replay


def exported_rows(client: Client, replay: Replay) -> list[dict]:
    exported = client.get(f"/incidents/replays/{replay.pk}/items.csv")
    assert exported["Content-Type"] == "text/csv; charset=utf-8"
    return list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))


def test_a_key_the_receiver_cannot_be_asked_about_at_run_time_is_skipped_not_said_changed(
    world, failed, monkeypatch
):
    """Between the preview and the run the destination is held (a Retry-After) and a person's lookup does not
    wait: the two keys the preview found are not asked. The result says that nothing was learnt, not that the
    receiver's answer changed; the three missing ones are sent as previewed."""
    from outbox.settlement import asked as settlement

    incident = Incident.objects.get()
    olga = client_of(world["olga"])
    replay = previewed(olga, incident)
    monkeypatch.setattr(settlement, "PERSON_LOOKUP_WAIT_SECONDS", 0.0)
    retry_after_hold("receiver", 30)
    assert olga.post(f"/incidents/replays/{replay.pk}/run").status_code == 302
    replay = replay_run(replay_id=replay.pk)
    assert replay.outcomes == {ReplayOutcome.SKIPPED: 2, ReplayOutcome.SENT: 3}
    notes = [i.outcome_note for i in replay.items.filter(outcome=ReplayOutcome.SKIPPED)]
    assert all(
        n.startswith("still needs_attention, nothing sent: the receiver could not") for n in notes
    )
    states = dict(Handoff.objects.values_list("pk", "state"))
    assert [states[h.pk] for h in failed] == ["needs_attention"] * 2 + ["pending"] * 3


def test_a_missing_key_whose_case_is_held_is_queued_behind_the_hold_and_says_whose(world, failed):
    """An operator holds one of the missing keys' cases between the preview and the run. The run retries it
    as a person's single retry does (docs/console.md, "hold / resume": queued with its key, sent once
    resumed), so it stays held and not due; its result names the hold, who set it and until when, and it is
    counted as queued, not among "sent again with the same key". Fails on the code before: the item said "due
    to be sent with the same key"; then, its note fixed, it was still counted as sent (outcome `sent`)."""
    incident = Incident.objects.get()
    olga = client_of(world["olga"])
    replay = previewed(olga, incident)
    case_hold(handoff_id=failed[2].pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    assert olga.post(f"/incidents/replays/{replay.pk}/run").status_code == 302
    replay = replay_run(replay_id=replay.pk)
    item = replay.items.get(handoff_id=failed[2].pk)
    assert item.outcome == ReplayOutcome.QUEUED and item.state_after == "pending"
    assert item.outcome_note.startswith(
        f"queued with the same key behind the hold of {failed[2].action_key} by "
    )
    assert item.outcome_note.endswith(", until resumed (calling ACME): sent once resumed")
    assert not Handoff.objects.due().filter(pk=failed[2].pk).exists()
    assert Handoff.objects.get(pk=failed[2].pk).is_held
    others = replay.items.filter(handoff_id__in=[h.pk for h in failed[3:]])
    assert {i.outcome_note for i in others} == {"due to be sent with the same key"}
    assert {i.outcome for i in others} == {ReplayOutcome.SENT}
    # Counted apart: the held one is not among "sent again with the same key" in the summary.
    replay.refresh_from_db()
    assert replay.outcomes[ReplayOutcome.SENT] == 2 and replay.outcomes[ReplayOutcome.QUEUED] == 1
    page = olga.get(f"/incidents/replays/{replay.pk}/").content.decode()
    assert (
        'data-outcome="queued"><td>queued with the same key behind a case hold</td><td class="count">1<'
        in page
    )


def test_people_of_other_workspaces_or_roles_neither_start_nor_see_a_replay(world, failed):
    incident = Incident.objects.get()
    client_of(world["olga"]).post(f"/incidents/{incident.pk}/replay")
    replay = Replay.objects.get()
    oscar = make_user("oscar", workspace=world["w8"], roles=(Role.OPERATOR,))
    for user in (world["bob"], world["mallory"], oscar):
        other = client_of(user)
        assert other.post(f"/incidents/{incident.pk}/replay").status_code in (403, 404)
        assert other.get(f"/incidents/replays/{replay.pk}/").status_code in (403, 404)
        assert other.get(f"/incidents/replays/{replay.pk}/items.csv").status_code in (403, 404)
        assert other.post(f"/incidents/replays/{replay.pk}/run").status_code in (403, 404)
    assert Replay.objects.count() == 1
    assert Replay.objects.get().state == ReplayState.PREVIEWING


def test_a_filter_of_the_handoff_list_starts_a_replay_of_its_matches(world, failed):
    olga = client_of(world["olga"])
    started = olga.post("/incidents/replays/from-filter", {"state": "needs_attention"})
    assert started.status_code == 302
    replay = replay_preview_run(replay_id=Replay.objects.get().pk)
    assert replay.incident is None and replay.total == len(failed)
    assert replay.verdicts == {ReplayVerdict.PRESENT: 2, ReplayVerdict.MISSING: 3}
    refused = olga.post("/incidents/replays/from-filter", {"state": "delivered"})
    assert refused.status_code == 409 and Replay.objects.count() == 1
