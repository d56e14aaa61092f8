"""The last pages' claims (issue 37): the observation pages' counts, the workspaces the audit export's form
offers, the handoff page's attempt count and the incident page's "members x of y settled" in the viewer's
view. Each page states its facts as claims, each claim is true, and a count the rows no longer bear out
fails with the screen, the words, the claim and the truth. Both backends."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import F
from django.template import Context, Template
from django.test import Client
from django.urls import reverse

from approvals.models import Mode, ObservedOutcome, Role, WorkflowMode
from approvals.services import support_staff_enroll, workflow_mode_set
from incidents.models import Incident, IncidentMember
from incidents.services.incidents import incidents_sync
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff
from tests.approvals.observation_world import observed_world
from tests.builders import record
from tests.factories import make_user, onboarding_world
from tests.incidents.test_incidents import REJECTED
from tests.oracle.oracle import assert_pages_true, check_pages, claims_in
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def pages_of(user, *urls: str) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    pages = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        pages[f"{user.get_username()} {url}"] = response.content.decode()
    return pages


def said(pages: dict) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for url, html in pages.items():
        for c in claims_in(url, html):
            out.setdefault((c.name, c.subject), set()).add(c.value)
    return out


def test_the_observation_pages_claim_each_count_and_a_count_gone_stale_is_caught():
    world = observed_world()
    olga = Client()
    olga.force_login(world["olga"])
    first, second = world["cases"][:2]
    for key, created in ((first, "no"), (second, "yes")):
        url = reverse("observation:record", args=[7, key])
        assert olga.post(url, {"task_created": created}).status_code == 302
    urls = (
        reverse("observation:index"),
        reverse("observation:agreement", args=[7, "onboarding-v1"]),
    )
    pages = pages_of(world["olga"], *urls)
    assert_pages_true(pages, Truth())
    claims, subject = said(pages), "observation:7|onboarding-v1"
    expected = {
        "observed": "3",
        "recorded": "2",
        "agree": "1",
        "disagree": "1",
        "unexplained": "1",
        "not_recorded": "1",
    }
    for field, value in expected.items():
        assert claims[(f"observation.{field}", subject)] == {value}, field
    # The owner explains the disagreement after the look: the pages' counts no longer hold.
    ObservedOutcome.objects.filter(agrees=False).update(explained_at=F("recorded_at"))
    problems, _ = check_pages(pages, Truth())
    assert {(p.claim.name, p.claim.value, p.truth) for p in problems} == {
        ("observation.unexplained", "1", "0")
    }
    assert len(problems) == 2  # the index's row and the agreement's count


def test_the_observation_page_claims_the_workflows_mode_and_a_mode_changed_since_is_caught():
    world = observed_world()
    urls = (reverse("observation:index"), reverse("observation:index") + "?workflow=onboarding")
    pages = pages_of(world["olga"], *urls)
    assert_pages_true(pages, Truth())
    assert said(pages)[("workflow.mode", "workflow:onboarding")] == {"observe"}
    # The workflow goes live after the look: both places the pages word its mode are caught.
    WorkflowMode.objects.filter(workflow="onboarding").update(mode=Mode.LIVE)
    problems, _ = check_pages(pages, Truth())
    assert {(p.claim.name, p.claim.value, p.truth) for p in problems} == {
        ("workflow.mode", "observe", "live")
    }
    assert len(problems) == 3  # each page's row, and the one workflow's line


def test_the_mode_badge_claims_the_mode_and_where_a_limited_workflow_sends():
    onboarding_world()
    support = make_user("support", is_staff=True, is_superuser=True)
    workflow_mode_set(
        workflow="onboarding",
        mode=Mode.LIMITED,
        actor=support,
        reason="pilot",
        allowed_workspace_ids=[7],
    )
    badge = Template("{% load workflow_modes %}{% workflow_mode wf ws %}")
    pages = {f"badge {ws}": badge.render(Context({"wf": "onboarding", "ws": ws})) for ws in (7, 8)}
    assert_pages_true(pages, Truth())
    claims = said(pages)
    assert claims[("workflow.mode", "workflow:onboarding")] == {"limited"}
    assert claims[("workflow.sends_here", "workflow:onboarding|ws:7")] == {"yes"}
    assert claims[("workflow.sends_here", "workflow:onboarding|ws:8")] == {"no"}
    # Workspace 7 leaves the pilot after the look: its badge's "sent here" is caught.
    WorkflowMode.objects.get(workflow="onboarding").allowed_workspaces.clear()
    problems, _ = check_pages(pages, Truth())
    assert {(p.claim.name, p.claim.subject, p.truth) for p in problems} == {
        ("workflow.sends_here", "workflow:onboarding|ws:7", "no")
    }


def test_the_audit_export_form_claims_only_the_workspaces_the_viewer_may_export():
    world = onboarding_world()
    staff = get_user_model().objects.create_user("sam-support", password="x-long-enough-pw")
    support_staff_enroll(user=staff)
    pages = {
        **pages_of(world["olga"], reverse("audit:export")),
        **pages_of(staff, reverse("audit:export")),
    }
    assert_pages_true(pages, Truth())
    offered = {s for (name, s) in said(pages) if name == "audit.exportable"}
    assert offered == {
        "user:olga|workspace:7",
        "user:sam-support|workspace:7",
        "user:sam-support|workspace:8",
    }
    # A form that offered olga workspace 8, where she is no operator, would fail.
    leak = '<option data-claim="audit.exportable" data-subject="user:olga|workspace:8" data-value="yes">'
    problems, _ = check_pages({"olga /audit/": leak + "Acme</option>"}, Truth())
    assert [(p.claim.value, p.truth) for p in problems] == [("yes", "no")]


def test_the_handoff_pages_attempt_count_is_claimed_and_a_counter_that_lies_is_caught():
    world = onboarding_world()
    handoff = record(101, payload=REJECTED)
    handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    urls = (reverse("outbox:detail", args=[handoff.pk]), reverse("outbox:list"))
    pages = pages_of(world["olga"], *urls)
    assert_pages_true(pages, Truth())
    assert said(pages)[("handoff.attempts_made", f"handoff:{handoff.pk}")] == {"1"}
    # The counter says two attempts where one attempt row was made: the page's count is caught.
    Handoff.objects.filter(pk=handoff.pk).update(attempts=F("attempts") + 1)
    problems, _ = check_pages(pages_of(world["olga"], *urls), Truth())
    lies = {(p.claim.name, p.claim.value, p.truth) for p in problems}
    assert ("handoff.attempts_made", "2", "1") in lies


def test_the_incident_page_claims_its_members_in_each_viewers_view():
    world = onboarding_world()
    make_user("otto", workspace=world["w8"], roles=(Role.OPERATOR,))
    for number in (101, 102):
        handoff = record(number, payload=REJECTED)
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    incidents_sync()
    incident = Incident.objects.get(workspace_id=7)
    # An operator of workspace 7 who holds the security incidents' permission also sees the members of no
    # workspace.
    staff = make_user("sam", workspace=world["w7"], roles=(Role.OPERATOR,))
    staff.user_permissions.add(Permission.objects.get(codename="view_security_incident"))
    url = reverse("incidents:detail", args=[incident.pk])
    pages = {**pages_of(world["olga"], url), **pages_of(staff, url)}
    assert_pages_true(pages, Truth())
    claims = said(pages)
    assert claims[("incident.members_in_view", f"incident:{incident.pk}|ws:7")] == {"2"}
    assert claims[("incident.settled_in_view", f"incident:{incident.pk}|ws:7")] == {"0"}
    staff_view = {s for (n, s) in claims if n == "incident.members_in_view"} - {
        f"incident:{incident.pk}|ws:7"
    }
    assert [s.endswith(",none") or s.endswith(":none") for s in staff_view] == [True]
    # One member moves out of olga's view after the look: her page's count no longer holds.
    member = IncidentMember.objects.filter(incident=incident).order_by("pk").first()
    IncidentMember.objects.filter(pk=member.pk).update(workspace_id=8)
    problems, _ = check_pages(pages_of(world["olga"], url) | pages, Truth())
    lies = {(p.claim.name, p.claim.subject, p.claim.value, p.truth) for p in problems}
    assert ("incident.members_in_view", f"incident:{incident.pk}|ws:7", "2", "1") in lies
