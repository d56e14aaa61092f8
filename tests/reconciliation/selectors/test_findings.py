"""reconciliation/selectors/findings.py: the reads of findings, repairs and runs."""

import pytest

from outbox.models import HandoffState
from reconciliation import selectors
from reconciliation.models import FindingKind, FindingStatus, ManualRepair, RunStatus
from tests.factories import FindingFactory, HandoffFactory, ReconciliationRunFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_live_findings_of_a_key_leave_out_resolved_ones(db):
    live = FindingFactory(action_key="onboarding:7:1:1")
    FindingFactory(
        action_key="onboarding:7:1:1", kind=FindingKind.STUCK, status=FindingStatus.RESOLVED
    )
    assert list(selectors.live_findings_of("onboarding:7:1:1")) == [live]
    assert list(selectors.live_findings([8])) == []
    assert selectors.findings_by_kind([7]) == {
        kind: int(kind == live.kind) for kind in FindingKind.values
    }


def test_repairs_of_a_handoff_are_those_of_its_workspace_and_key_oldest_first(db):
    handoff = HandoffFactory()
    first = ManualRepair.objects.create(
        workspace_id=7,
        action_key=handoff.action_key,
        actor_label="olga",
        what_was_done="created by hand",
    )
    second = ManualRepair.objects.create(
        workspace_id=7, action_key=handoff.action_key, actor_label="olga", what_was_done="checked"
    )
    ManualRepair.objects.create(
        workspace_id=8, action_key=handoff.action_key, actor_label="x", what_was_done="-"
    )
    assert list(selectors.repairs_of(handoff)) == [first, second]


def test_last_run_is_the_newest_finished_run_covering_the_workspace_and_runs_visible_are_full_or_own(
    db,
):
    full = ReconciliationRunFactory()
    own = ReconciliationRunFactory(workspace_id=7)
    ReconciliationRunFactory(workspace_id=8)
    running = ReconciliationRunFactory(status=RunStatus.RUNNING)
    assert selectors.last_run() == full
    assert selectors.last_run(7) == own
    assert set(selectors.runs_visible_to([7])) == {full, own, running}


def test_findings_without_a_workspace_are_visible_to_staff_only(db):
    mine, unscoped = FindingFactory(), FindingFactory(workspace_id=None)
    FindingFactory(workspace_id=8)
    assert list(selectors.findings_visible_to([7])) == [mine]
    assert set(selectors.findings_visible_to([7], include_unscoped=True)) == {mine, unscoped}
