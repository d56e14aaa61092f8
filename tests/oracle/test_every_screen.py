"""The oracle over the screens beyond the handoff and request pages: Home's counts, findings, reconciliation
runs, bulk jobs, replays and their items, incidents (members, owner, SLA), the archived handoff, and support's
least-privilege admin pages (requests and their revisions, runs, findings, incidents). Each screen states its
facts as claims, every claim is true after every kind of evidence, and a claim the records no longer bear out
fails with the screen, the words, the claim and the truth. Both backends."""

import pytest
from django.contrib.auth import get_user_model

from approvals.services import support_staff_enroll
from delivery.services import task_status_set
from incidents.models import Incident
from incidents.services.incidents import incidents_sync
from incidents.services.replay_preview import replay_preview_run, replay_start
from outbox.dispatch.dispatcher import drain
from outbox.models import ArchivedHandoff, Handoff, HandoffState
from outbox.services.bulk import bulk_job_run, bulk_job_start
from outbox.services.retention import handoffs_archive_settled
from reconciliation.models import Finding
from reconciliation.services import reconciliation_run
from tests.builders import approve
from tests.delivery.test_mailbox import mailbox, send  # noqa: F401 - a fixture, shared
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true, check_pages, claims_in
from tests.oracle.screens import render_every_screen
from tests.oracle.test_oracle import every_kind_of_evidence
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def world():
    return three_step_onboarding_world()


def least_privilege_support():
    """Support staff as the product makes them: the support group's view permissions, no superuser."""
    user = get_user_model().objects.create_user("sam-support", password="x-long-enough-pw")
    support_staff_enroll(user=user)
    return user


def roles(world) -> dict:
    return {
        "requester": world["bob"],
        "approver": world["alice"],
        "operator": world["olga"],
        "support": least_privilege_support(),
    }


def said(pages: dict) -> set[tuple[str, str, str]]:
    return {(c.name, c.subject, c.value) for u, h in pages.items() for c in claims_in(u, h)}


def test_home_findings_runs_bulk_jobs_replays_incidents_and_admin_state_true_claims(world):
    every_kind_of_evidence(world)
    incidents_sync()
    handoffs = Handoff.objects.filter(workspace_id=7, kind="action").order_by("pk")
    job = bulk_job_start(
        action="assign",
        handoff_ids=list(handoffs.values_list("pk", flat=True)[:3]),
        actor=world["olga"],
        owner=world["olga"],
    )
    bulk_job_run(job_id=job.pk)
    delivered = handoffs.filter(state=HandoffState.DELIVERED).values_list("pk", flat=True)[:2]
    replay = replay_start(
        handoffs=Handoff.objects.filter(pk__in=list(delivered)),
        workspace_ids=[7],
        actor=world["olga"],
    )
    replay_preview_run(replay_id=replay.pk)
    pages = render_every_screen(roles(world))
    checked = assert_pages_true(pages, Truth())
    claims = said(pages)
    names = {name for name, _, _ in claims}
    for name in [
        "workspace.awaiting",
        "workspace.needing_person",
        "finding.status",
        "run.status",
        "run.keys_compared",
        "run.findings_total",
        "bulk_job.state",
        "bulk_job.position",
        "bulk_job.done",
        "replay.state",
        "replay.previewed",
        "replay_item.verdict",
        "request.revision",
    ]:
        assert name in names, name
    assert ("bulk_job.done", f"bulk_job:{job.pk}", "3") in claims
    assert ("replay.previewed", f"replay:{replay.pk}", "2") in claims
    # Home: the approver's one request awaiting a decision, the operator's handoffs needing a person.
    assert ("workspace.awaiting", "workspace:7", "1") in claims
    needing = {v for n, s, v in claims if n == "workspace.needing_person" and s == "workspace:7"}
    assert needing and needing != {"0"}
    # Support's least-privilege admin states the requests' states and revisions and the findings.
    admin = {c.name for u, h in pages.items() if u.startswith("support ") for c in claims_in(u, h)}
    assert {"request.state", "request.revision", "finding.status", "run.status"} <= admin
    assert checked > 100


def test_incident_pages_state_members_owner_and_sla_true(world):
    every_kind_of_evidence(world)
    # Request 44's task is gone at the receiver: its finding pages the workspace's on-call (olga).
    incidents_sync()
    pages = render_every_screen(roles(world))
    assert_pages_true(pages, Truth())
    names = {name for name, _, _ in said(pages)}
    assert Incident.objects.exists()
    assert {"incident.member_count", "incident.settled_count", "incident.owner"} <= names


def test_an_archived_handoff_states_its_final_state_and_task_true(world):
    approve(world)
    drain()
    for step in Handoff.objects.filter(instance_key="onboarding:7:42:1"):
        task_status_set(action_key=step.action_key, status="done")
    reconciliation_run()
    handoffs_archive_settled(older_than_days=0)
    archived = ArchivedHandoff.objects.order_by("pk").first()
    assert archived is not None
    pages = render_every_screen(roles(world))
    assert_pages_true(pages, Truth())
    claims = said(pages)
    subject = f"archived:{archived.pk}"
    assert ("archived.final_state", subject, archived.final_state) in claims
    assert ("archived.task_id", subject, archived.task_id) in claims


def test_a_finding_resolved_after_the_look_fails_with_the_screen_words_claim_and_truth(world):
    every_kind_of_evidence(world)
    pages = render_every_screen(roles(world))
    finding = Finding.objects.exclude(status="resolved").order_by("pk").first()
    assert finding is not None
    Finding.objects.filter(pk=finding.pk).update(status="resolved")
    problems, _ = check_pages(pages, Truth())
    lies = [p for p in problems if p.claim.subject == f"finding:{finding.pk}"]
    assert lies, problems
    assert {p.claim.name for p in lies} == {"finding.status"}
    assert all(p.truth == "resolved" and p.claim.value == finding.status for p in lies)
    assert any(p.claim.url.startswith("operator /reconciliation/findings/") for p in lies)
    assert any(p.claim.url.startswith("support /admin/") for p in lies)
    assert all(p.claim.words for p in lies)


def test_every_figure_on_health_states_a_true_claim(world):
    every_kind_of_evidence(world)
    incidents_sync()
    pages = render_every_screen(roles(world))
    assert_pages_true(pages, Truth())
    health = {
        (c.name, c.value)
        for u, h in pages.items()
        if u == "operator /health/"
        for c in claims_in(u, h)
    }
    names = {name for name, _ in health}
    for figure in [
        "needing_person",
        "oldest_pending_seconds",
        "oldest_in_flight_seconds",
        "ack_median_seconds",
        "ack_worst_seconds",
        "acknowledged",
        "unacknowledged",
        "duplicate_preventions",
        "manual_interventions",
        "outcome_validation_failures",
        "open_findings",
        "rule_handoffs",
        "rule_needed_attention",
        "incidents_paging",
        "incidents_queued",
    ]:
        assert f"health.{figure}" in names, figure
    assert ("health.oldest_in_flight_seconds", "none") in health
    oldest = Handoff.objects.filter(state="pending", workspace_id=7).order_by("created_at").first()
    assert ("health.oldest_pending_seconds", oldest.created_at.isoformat()) in health
    assert ("health.open_findings", "1") in health  # 44's task missing at the receiver


def test_the_demo_mailbox_states_each_recipient_true_and_never_the_address(
    world,
    mailbox,  # noqa: F811 - the fixture imported above
    settings,
):
    directory, port = mailbox
    send(port, subject="Welcome, Northwind", message_id="<k1@handoff.local>")
    settings.DEMO_MAILBOX_DIR = str(directory)
    pages = render_every_screen(roles(world))
    assert "operator /delivery/mailbox/" in pages
    assert_pages_true(pages, Truth())
    assert ("mail.to", "mail:<k1@handoff.local>", "…@example.com") in said(pages)
    # A page that showed the address (or another message's recipient) would fail.
    leak = (
        '<dd data-claim="mail.to" data-subject="mail:<k1@handoff.local>" '
        'data-value="ops@example.com">ops@example.com</dd>'
    )
    problems, _ = check_pages({"operator /delivery/mailbox/": leak}, Truth())
    assert [(p.claim.value, p.truth) for p in problems] == [("ops@example.com", "…@example.com")]
