"""Observe, limited and live modes, checked at a real receiver; mode changes audited; the mode badge."""

import importlib.util
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.template import Context, Template

import config.settings
from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import Mode, WorkflowMode, WorkflowModeChange
from approvals.services import request_approve, workflow_mode_set
from approvals.services.go_live import GoLiveRefused
from delivery.models import ReceiverTask
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import drain
from outbox.models import Handoff, HandoffState
from tests.factories import make_request, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


class CountingDestination(InProcessDestination):
    """The in-process receiver, counting the calls made to it."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def deliver(self, outgoing):
        self.calls.append(outgoing.action_key)
        return super().deliver(outgoing)


@pytest.fixture
def support(db):
    return make_user("support", is_staff=True, is_superuser=True)


def approve(world, request, approver_key="alice"):
    return request_approve(
        workspace_id=request.workspace_id,
        number=request.number,
        revision=request.revision,
        actor=world[approver_key],
        payload_hash=request.payload_hash,
    )


def test_observe_mode_records_the_handoff_and_never_calls_the_receiver(world, support):
    workflow_mode_set(
        workflow="onboarding",
        mode=Mode.OBSERVE,
        actor=support,
        reason="compare with manual process",
    )
    handoff = approve(world, world["request"])
    assert handoff.state == HandoffState.OBSERVED
    assert (handoff.action_key, handoff.payload, handoff.destination) == (
        "onboarding:7:42:1",
        world["request"].payload,
        "receiver",
    )
    destination = CountingDestination()
    drain(destination=destination)
    assert destination.calls == []
    assert ReceiverTask.objects.using("delivery").count() == 0
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.OBSERVED


def test_live_mode_sends_to_the_receiver(world, support):
    workflow_mode_set(workflow="onboarding", mode=Mode.LIVE, actor=support, reason="go live")
    handoff = approve(world, world["request"])
    destination = CountingDestination()
    drain(destination=destination)
    assert destination.calls == ["onboarding:7:42:1"]
    assert list(ReceiverTask.objects.using("delivery").values_list("action_key", flat=True)) == [
        handoff.action_key
    ]


def test_limited_mode_sends_only_for_allowed_workspaces(world, support):
    workflow_mode_set(
        workflow="onboarding",
        mode=Mode.LIMITED,
        actor=support,
        reason="pilot in 7",
        allowed_workspace_ids=[7],
    )
    requester8 = make_user("rita", workspace=world["w8"], roles=("requester",))
    request8 = make_request(world["w8"], 5, requester8)
    sent = approve(world, world["request"])
    observed = approve(world, request8, approver_key="mallory")
    assert sent.state == HandoffState.PENDING
    assert observed.state == HandoffState.OBSERVED
    destination = CountingDestination()
    drain(destination=destination)
    assert destination.calls == ["onboarding:7:42:1"]
    assert list(ReceiverTask.objects.using("delivery").values_list("action_key", flat=True)) == [
        "onboarding:7:42:1"
    ]
    assert Handoff.objects.get(pk=observed.pk).state == HandoffState.OBSERVED


def _settings_of(monkeypatch, **env):
    """config/settings/intake_and_alerts.py read afresh with this environment (the suite's own settings
    set a default mode for its workflows)."""
    for name in ("WORKFLOW_DEFAULT_MODE", "WORKFLOW_DEFAULT_MODE_REASON"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    path = Path(config.settings.__file__).with_name("intake_and_alerts.py")
    spec = importlib.util.spec_from_file_location("fresh_intake_and_alerts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_new_workflow_starts_in_observe_unless_configured_otherwise_with_a_reason(
    world, settings, monkeypatch
):
    # Issue 37 item 10: WORKFLOW_DEFAULT_MODE defaulted to live, so a new workflow skipped observation.
    settings.WORKFLOW_DEFAULT_MODE = _settings_of(monkeypatch).WORKFLOW_DEFAULT_MODE
    assert settings.WORKFLOW_DEFAULT_MODE == "observe"
    assert approve(world, world["request"]).state == HandoffState.OBSERVED
    destination = CountingDestination()
    drain(destination=destination)
    assert destination.calls == []
    with pytest.raises(ImproperlyConfigured, match="^WORKFLOW_DEFAULT_MODE_REASON: required"):
        _settings_of(monkeypatch, WORKFLOW_DEFAULT_MODE="live")
    configured = _settings_of(
        monkeypatch, WORKFLOW_DEFAULT_MODE="live", WORKFLOW_DEFAULT_MODE_REASON="migrated as-is"
    )
    assert configured.WORKFLOW_DEFAULT_MODE == "live"


def test_mode_changes_are_audited(world, support):
    workflow_mode_set(
        workflow="onboarding", mode=Mode.OBSERVE, actor=support, reason="start watching"
    )
    workflow_mode_set(
        workflow="onboarding",
        mode=Mode.LIMITED,
        actor=support,
        reason="pilot",
        allowed_workspace_ids=[7, 8],
    )
    # Going live is the owner's, by typing the workflow's name (issue 37 item 10): not a mode change.
    with pytest.raises(GoLiveRefused, match="only its owner switches it to live"):
        workflow_mode_set(workflow="onboarding", mode=Mode.LIVE, actor=support, reason="all in")
    changes = list(
        WorkflowModeChange.objects.order_by("id").values_list(
            "from_mode", "to_mode", "from_allowed", "to_allowed", "changed_by__username", "reason"
        )
    )
    assert changes == [
        ("live", "observe", [], [], "support", "start watching"),
        ("observe", "limited", [], [7, 8], "support", "pilot"),
    ]
    assert WorkflowModeChange.objects.filter(changed_at__isnull=True).count() == 0
    assert WorkflowMode.objects.get(workflow="onboarding").mode == Mode.LIMITED


def test_mode_change_needs_permission_a_reason_and_a_known_mode(world, support):
    with pytest.raises(ApprovalDenied):
        workflow_mode_set(
            workflow="onboarding", mode=Mode.OBSERVE, actor=world["olga"], reason="why not"
        )
    with pytest.raises(InvalidPayload):
        workflow_mode_set(workflow="onboarding", mode=Mode.OBSERVE, actor=support, reason=" ")
    with pytest.raises(InvalidPayload):
        workflow_mode_set(workflow="onboarding", mode="loud", actor=support, reason="typo")
    assert WorkflowMode.objects.count() == 0
    assert WorkflowModeChange.objects.count() == 0


def render_badge(workspace_id: int) -> str:
    return Template("{% load workflow_modes %}{% workflow_mode wf ws %}").render(
        Context({"wf": "onboarding", "ws": workspace_id})
    )


def test_mode_badge_shows_mode_and_whether_this_workspace_sends(world, support):
    assert 'data-mode="live" data-sends="true"' in render_badge(7)
    workflow_mode_set(
        workflow="onboarding",
        mode=Mode.LIMITED,
        actor=support,
        reason="pilot",
        allowed_workspace_ids=[7],
    )
    assert "limited (sent here)" in render_badge(7)
    assert "limited (observed here)" in render_badge(8)
    assert 'data-sends="false"' in render_badge(8)
    workflow_mode_set(workflow="onboarding", mode=Mode.OBSERVE, actor=support, reason="pause")
    assert 'data-mode="observe" data-sends="false"' in render_badge(7)
