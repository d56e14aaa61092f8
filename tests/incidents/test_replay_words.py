"""A replay says what happened to each item (issue 37 item 7): a replay of handoffs that were delivered before
its preview asked ends "already delivered", not "left for a person"; what its run settles records its own
reason code (`settled_by_replay`); and the item rows refresh with the progress, so a row the preview answered
never still reads "not asked yet"."""

import pytest
from django.urls import reverse

from delivery.models import ReceiverTask
from incidents.models import Replay, ReplayOutcome, ReplayVerdict
from incidents.services.replay_preview import replay_preview_run
from incidents.services.replay_run import replay_run
from outbox.models import Handoff, HandoffState
from outbox.services import handoff_settle
from tests.incidents.test_replay_views import client_of, failed  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
HTMX = {"HTTP_HX_REQUEST": "true"}


def started(olga) -> Replay:
    response = olga.post("/incidents/replays/from-filter", {"state": "needs_attention"})
    assert response.status_code == 302
    return Replay.objects.get()


def test_a_replay_of_handoffs_delivered_meanwhile_says_already_delivered(world, failed):  # noqa: F811
    olga = client_of(world["olga"])
    replay = started(olga)
    for h in failed[2:]:
        ReceiverTask.objects.using("delivery").create(
            action_key=h.action_key, payload=h.payload, payload_hash=h.payload_hash
        )
    for h in failed:
        assert handoff_settle(handoff_id=h.pk) == S.DELIVERED
    replay = replay_preview_run(replay_id=replay.pk)
    assert replay.verdicts == {ReplayVerdict.NOTHING_TO_DO: 5}
    assert olga.post(f"/incidents/replays/{replay.pk}/run").status_code == 302
    replay = replay_run(replay_id=replay.pk)
    assert replay.outcomes == {ReplayOutcome.ALREADY_DELIVERED: 5}
    page = olga.get(reverse("incidents:replay", args=[replay.pk])).content.decode()
    assert (
        'data-outcome="delivered"><td>already delivered, nothing sent</td><td class="count">5'
        in page
    )
    assert '<td>left for a person</td><td class="count">0</td>' in page
    assert ReceiverTask.objects.using("delivery").count() == 5, "nothing sent"


def test_what_a_replay_settles_records_settled_by_replay(world, failed):  # noqa: F811
    olga = client_of(world["olga"])
    replay = replay_preview_run(replay_id=started(olga).pk)
    assert replay.verdicts == {ReplayVerdict.PRESENT: 2, ReplayVerdict.MISSING: 3}
    olga.post(f"/incidents/replays/{replay.pk}/run")
    replay_run(replay_id=replay.pk)
    codes = dict(Handoff.objects.values_list("pk", "reason_code"))
    assert [codes[h.pk] for h in failed[:2]] == ["settled_by_replay"] * 2
    assert ReceiverTask.objects.using("delivery").count() == 2


def test_the_refreshed_progress_shows_each_item_as_the_preview_answered(world, failed):  # noqa: F811
    olga = client_of(world["olga"])
    replay = started(olga)
    waiting = olga.get(reverse("incidents:replay", args=[replay.pk]), **HTMX).content.decode()
    assert waiting.count("not asked yet") == 5
    replay_preview_run(replay_id=replay.pk)
    # The page's next refresh (htmx swaps the progress region): the rows say what the destination said.
    refreshed = olga.get(reverse("incidents:replay", args=[replay.pk]), **HTMX).content.decode()
    assert "not asked yet" not in refreshed
    assert refreshed.count(ReplayVerdict.PRESENT.label) == 3  # the count row and two items
    assert refreshed.count(ReplayVerdict.MISSING.label) == 4
