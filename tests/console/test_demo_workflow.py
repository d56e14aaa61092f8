"""The demo's onboarding runs in three steps, so `make run` shows steps, keys and compensation."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from approvals.models import Request
from approvals.rules import rules_for
from approvals.services import request_approve

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_the_demo_publishes_a_three_step_onboarding_and_request_42_starts_with_its_first_step():
    call_command("demo", password="demo-password-long", stdout=StringIO())
    rules = rules_for("onboarding")
    assert [step["name"] for step in rules.steps] == [
        "create_client",
        "provision_account",
        "send_welcome_pack",
    ]
    request = Request.objects.get(workspace_id=7, number=42, revision=1)
    alice = get_user_model().objects.get(username="alice")
    handoff = request_approve(
        workspace_id=7, number=42, revision=1, actor=alice, payload_hash=request.payload_hash
    )
    assert (handoff.action_key, handoff.instance_key) == (
        "onboarding:7:42:1:create_client",
        "onboarding:7:42:1",
    )
    assert handoff.payload["operation"] == "create_client"
