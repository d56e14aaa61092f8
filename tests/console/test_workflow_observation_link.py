"""Every screen that names a workflow leads to its observation: the mode badge ("mode: observe") on a request's
and a handoff's page links to `/observation/?workflow=…&workspace=…`, which lists that workflow's observed
rule versions in that workspace (each linking to its agreement page) and says its mode. Before, observation
was reachable only from the nav, and nothing on a workflow's screens said where its pilot was compared."""

import html
import re

import pytest
from django.urls import reverse

from approvals.models import Mode, WorkflowMode
from outbox.models import Handoff
from tests.approvals.observation_world import observed_world
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

LINK = "/observation/?workflow=onboarding&amp;workspace=7"


@pytest.fixture
def world(db):
    return observed_world()


def _badge_link(body: str) -> str:
    match = re.search(
        r'<span class="mode [^"]*"[^>]*><a href="([^"]+)"[^>]*>mode: (\w+)[^<]*</a>', body
    )
    assert match, "the page shows the workflow's mode badge with a link"
    return match.group(1), match.group(2)


def test_the_request_and_handoff_pages_link_the_mode_to_the_workflows_observation(world):
    bob = client_for(world["bob"])
    request_page = bob.get(reverse("approvals:detail", args=[7, 42, 1])).content.decode()
    assert _badge_link(request_page) == (LINK, "observe")

    handoff = Handoff.objects.get(action_key=world["cases"][0])
    olga = client_for(world["olga"])
    handoff_page = olga.get(f"/handoffs/{handoff.pk}/").content.decode()
    assert _badge_link(handoff_page) == (LINK, "observe")


def test_the_workflows_observation_lists_its_versions_in_that_workspace_and_its_mode(world):
    page = client_for(world["bob"]).get(html.unescape(LINK))

    assert page.status_code == 200
    body = page.content.decode()
    assert "Observation of onboarding in workspace #7" in body
    assert re.search(
        r'id="observation-workflow-mode">Workflow onboarding is in mode <strong>observe', body
    )
    agreement = reverse("observation:agreement", args=[7, "onboarding-v1"])
    row = re.search(r'<tr id="observed-7-onboarding-v1">(.*?)</tr>', body, re.S).group(1)
    assert f'href="{agreement}"' in row and ">observe</td>" in row
    assert 'id="observed-8-' not in body, "workspace 8's cases are not listed"


def test_after_going_live_the_page_says_live(world):
    WorkflowMode.objects.filter(workflow="onboarding").update(mode=Mode.LIVE)
    body = " ".join(client_for(world["bob"]).get(html.unescape(LINK)).content.decode().split())
    assert "is in mode <strong>live</strong>: approved handoffs are sent" in body


def test_another_workspace_is_a_404_and_bad_input_is_not_a_500(world):
    mallory = client_for(world["mallory"])  # approver of workspace 8 only
    assert mallory.get(html.unescape(LINK)).status_code == 404
    assert mallory.get("/observation/?workflow=onboarding&workspace=x").status_code == 404
    own = mallory.get("/observation/?workflow=onboarding&workspace=8").content.decode()
    assert 'id="observed-8-onboarding-v1"' in own and 'id="observed-7-' not in own
