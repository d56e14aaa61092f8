"""The demo shows the approvers' side of issue 39: the onboarding's approval deadline with request 43 due a
reminder (the first sweep records alice's, dana's and alice's delegate's e-mails, each with their own
approval link, to the product's e-mail destination), alice's delegate, and request 41's client erased on
request; a second load adds nothing."""

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import F
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalDelegation, ApprovalPolicy, Request
from approvals.rules import payload_problems, rules_for
from approvals.services import request_approve
from approvals.services.approval_deadlines import approval_deadlines_sweep
from outbox.models import ERASED, Erasure, Handoff
from tests.approvals.notices import recorded_mail

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_the_demo_shows_a_deadline_a_reminder_link_a_delegate_and_an_erased_client():
    call_command("demo", password="demo-password-long", stdout=StringIO())

    assert ApprovalPolicy.objects.get(workflow="onboarding").due_after_hours == 24
    assert Request.objects.get(workspace_id=7, number=43).is_awaiting_approval
    approval_deadlines_sweep()
    reminded = {m.to[0]: m.body for m in recorded_mail() if m.subject.startswith("Approval due")}
    # mallory, alice's delegate while she is away, is reminded beside the approvers.
    assert sorted(reminded) == ["alice@example.com", "dana@example.com", "mallory@example.com"]
    assert all("/approvals/link/" in body for body in reminded.values())

    (delegation,) = ApprovalDelegation.objects.filter(approver__username="alice")
    assert delegation.delegate.username == "mallory" and delegation.revoked_at is None

    erased = Request.objects.get(workspace_id=7, number=41)
    assert erased.payload["contact_email"] == ERASED
    (erasure,) = Erasure.objects.all()
    assert erasure.erased_by.username == "olga" and erased.erasure_id == erasure.pk
    client = Client()
    client.force_login(erased.requested_by)
    page = client.get(reverse("approvals:detail", args=[7, 41, 1])).content.decode()
    assert "Personal data erased on" in page and "by olga" in page

    out = StringIO()
    call_command("demo", password="demo-password-long", stdout=out)
    assert "added:" not in out.getvalue()
    assert Erasure.objects.count() == 1


def test_the_demos_reminded_request_can_be_approved_from_the_link_under_the_rules_in_force():
    """Request 43 is the one the demo's reminder links to: the journey ends in a decision, so its payload must
    pass the onboarding's rules in force (a plan they list)."""
    call_command("demo", password="demo-password-long", stdout=StringIO())
    approval_deadlines_sweep()
    (body,) = [m.body for m in recorded_mail() if m.to == ["alice@example.com"]]
    link = re.search(r"http://[^/]+(/approvals/link/[^/\s]+/)", body).group(1)
    alice = get_user_model().objects.get(username="alice")
    client = Client()
    client.force_login(alice)
    page = client.get(link, follow=True)
    assert page.redirect_chain[-1][0] == "/approvals/7/43/1/"
    waiting = Request.objects.get(workspace_id=7, number=43)
    assert payload_problems("onboarding", waiting.payload, rules_for("onboarding")) == []
    handoff = request_approve(
        workspace_id=7, number=43, revision=1, actor=alice, payload_hash=waiting.payload_hash
    )
    assert handoff.action_key.startswith("onboarding:7:43:1")


def test_a_later_load_says_what_time_did_to_the_demo_since_it_was_loaded():
    """`make run` days after the demo was loaded keeps its rows (loaded once) and said only what it added:
    request 43 overdue and request 46's step gone read as if they were the demo's own story. A later load now
    says when the demo was loaded and, from the rows, what time did since."""
    call_command("demo", password="demo-password-long", stdout=StringIO())
    out = StringIO()
    call_command("demo", password="demo-password-long", stdout=out)
    assert "The demo was loaded" not in out.getvalue()  # within the hour: nothing to say

    # Three days and more later, as the database clock sees it: every time the demo wrote moves back.
    back = timedelta(hours=80)
    Request.objects.update(created_at=F("created_at") - back)
    Handoff.objects.update(not_before=F("not_before") - back, finish_by=F("finish_by") - back)
    out = StringIO()
    call_command("demo", password="demo-password-long", stdout=out)
    said = out.getvalue()
    assert "The demo was loaded" in said and "80 hours ago" in said, said
    due = Request.objects.get(workspace_id=7, number=43).created_at + timedelta(hours=24)
    assert f"request 43: its approval due {due:%Y-%m-%d %H:%M} UTC (passed)" in said
    start = Handoff.objects.filter(action_key__startswith="onboarding:7:46:").order_by("pk")[0]
    assert f"may not go before {start.not_before:%Y-%m-%d %H:%M} UTC (passed)" in said
