"""The handoff list offers "Preview a replay of these handoffs" for the filter on screen: a POST (with CSRF) to
`/incidents/replays/from-filter` carrying exactly the list's filter, which creates the replay's preview over
the filtered handoffs of the operator's workspaces and goes to its page; it says on screen that the receiver is
asked about each key first and nothing is sent until the run is confirmed. Requesters see no button and are
refused (403); an operator of another workspace neither sees nor replays this workspace's handoffs."""

import html
import re

import pytest
from django.db.models.functions import Now
from django.test import Client

from approvals.models import Membership, Role
from incidents.models import Replay, ReplayItem
from outbox.models import Handoff, HandoffState
from tests.builders import record
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

FILTER = "/handoffs/?state=needs_attention&workspace=7"


@pytest.fixture
def handoffs(world):
    """Workspace 7: three that need attention and two pending; workspace 8: one that needs attention."""
    w7 = [record(n) for n in range(70, 75)]
    w8 = record(80, workspace_id=8)
    failed = [*w7[:3], w8]
    Handoff.objects.filter(pk__in=[h.pk for h in failed]).update(
        state=HandoffState.NEEDS_ATTENTION,
        failure_class="transient",
        reason_code="retries_exhausted",
        attention_since=Now(),
    )
    return {"failed_w7": w7[:3], "pending_w7": w7[3:], "failed_w8": w8}


def _replay_form(body: str) -> tuple[str, dict[str, str]] | None:
    """The list's replay form: where it posts and the fields it sends (None when the page has none)."""
    match = re.search(
        r'<form method="post" action="([^"]+)" id="replay-from-filter".*?</form>', body, re.S
    )
    if match is None:
        return None
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', match.group(0))
    return match.group(1), {name: html.unescape(value) for name, value in fields}


def test_an_operators_click_previews_a_replay_of_exactly_the_filtered_handoffs(world, handoffs):
    olga = Client(enforce_csrf_checks=True)
    olga.force_login(world["olga"])
    page = olga.get(FILTER).content.decode()
    action, fields = _replay_form(page)
    assert action == "/incidents/replays/from-filter"
    assert fields.pop("csrfmiddlewaretoken")
    assert fields == {"state": "needs_attention", "workspace": "7"}, (
        "the form carries the list's filter"
    )
    explained = " ".join(
        re.search(r'id="replay-from-filter-explained">(.*?)</p>', page, re.S).group(1).split()
    )
    assert "asks the receiver about each key first" in explained
    assert "Nothing is sent until you confirm the run" in explained

    assert olga.post(action, {"state": "needs_attention"}).status_code == 403, (
        "no CSRF token: refused"
    )
    assert not Replay.objects.exists()
    started = olga.post(action, {**fields, "csrfmiddlewaretoken": olga.cookies["csrftoken"].value})

    replay = Replay.objects.get()
    assert started.status_code == 302 and started["Location"] == f"/incidents/replays/{replay.pk}/"
    assert replay.actor == world["olga"] and replay.total == 3
    items = set(ReplayItem.objects.filter(replay=replay).values_list("handoff_id", flat=True))
    assert items == {h.pk for h in handoffs["failed_w7"]}
    progress = olga.get(started["Location"])
    assert progress.status_code == 200 and "Asking the destinations" in progress.content.decode()


def test_a_requester_sees_no_replay_button_and_is_refused(world, handoffs):
    bob = client_for(world["bob"])
    assert _replay_form(bob.get(FILTER).content.decode()) is None
    assert (
        bob.post("/incidents/replays/from-filter", {"state": "needs_attention"}).status_code == 403
    )
    assert not Replay.objects.exists()


def test_an_operator_of_another_workspace_cannot_replay_this_ones_handoffs(world, handoffs):
    otto = client_for(world["otto"])  # operator of workspace 8 only
    listed = otto.get("/handoffs/?state=needs_attention").content.decode()
    assert _replay_form(listed)[1].get("workspace") is None
    refused = otto.post(
        "/incidents/replays/from-filter", {"state": "needs_attention", "workspace": "7"}
    )
    # Workspace 7 is not among his choices: refused with the reason (422), nothing started, nothing said of it.
    assert refused.status_code == 422 and "Nothing was done: workspace" in refused.content.decode()
    assert not Replay.objects.exists()
    # Without a workspace, his replay holds workspace 8's handoff only.
    otto.post("/incidents/replays/from-filter", {"state": "needs_attention"})
    items = ReplayItem.objects.filter(replay=Replay.objects.get())
    assert list(items.values_list("handoff_id", flat=True)) == [handoffs["failed_w8"].pk]


def test_a_filter_naming_a_workspace_where_one_is_no_operator_offers_no_replay(world, handoffs):
    """olga is an operator of workspace 7 and a requester of workspace 8: filtered to 8 the list offers no
    replay (the endpoint would refuse it) and says why."""
    Membership.objects.create(user=world["olga"], workspace=world["w8"], role=Role.REQUESTER)
    olga = client_for(world["olga"])
    body = olga.get("/handoffs/?state=needs_attention&workspace=8").content.decode()
    assert _replay_form(body) is None
    assert 'id="replay-from-filter-refused"' in body
    assert _replay_form(olga.get(FILTER).content.decode()) is not None
