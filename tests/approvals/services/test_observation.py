"""Observation mode that compares: recording what the current process did with an observed case, the
agreement with the product's plan, CSV imports (all or nothing), the owner's explanations and the owner's
confirmation that the workflow goes live (audited)."""

import pytest
from django.contrib.auth import get_user_model

from approvals.agreement import agreement_of, workflow_agreement
from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import Mode, ObservedOutcome, PilotBrief, WorkflowMode, WorkflowModeChange
from approvals.services.go_live import GoLiveRefused, workflow_go_live
from approvals.services.observation import (
    CurrentProcessOutcome,
    ObservationRefused,
    observed_outcome_explain,
    observed_outcome_record,
    pilot_brief_set,
)
from approvals.services.observation_import import MAX_BYTES, observed_outcomes_import
from tests.approvals.observation_world import observed_world


@pytest.fixture
def world(db):
    return observed_world()


def _record(world, key, *, created=True, receiver="", actor=None):
    return observed_outcome_record(
        workspace_id=7,
        entry=CurrentProcessOutcome(key=key, task_created=created, receiver=receiver),
        actor=actor or world["olga"],
    )


def test_a_task_created_by_the_current_process_agrees_with_the_plan(world):
    row = _record(world, world["cases"][0])
    assert (row.agrees, row.planned) == (True, [{"step": "onboarding", "destination": "receiver"}])
    assert (row.recorded_by, row.rule_version, row.workflow) == (
        world["olga"],
        "onboarding-v1",
        "onboarding",
    )


def test_no_task_or_another_receiver_disagrees_and_says_how(world):
    none = _record(world, world["cases"][0], created=False)
    elsewhere = _record(world, world["cases"][1], receiver="crm")
    assert (none.agrees, elsewhere.agrees) == (False, False)
    assert "created none" in none.difference
    assert "at crm" in elsewhere.difference
    assert agreement_of(7, "onboarding-v1") == agreement_of(7, "onboarding-v1").__class__(
        observed=3, recorded=2, agree=0, disagree=2, unexplained=2
    )


def test_the_instance_key_finds_the_case_too(world):
    row = _record(world, "onboarding:7:43:1")
    assert row.action_key == world["cases"][1]


def test_recording_again_keeps_the_first_as_history_and_counts_the_newest(world):
    _record(world, world["cases"][0], created=False)
    _record(world, world["cases"][0], created=True)
    rows = ObservedOutcome.objects.filter(action_key=world["cases"][0]).order_by("id")
    assert [(r.agrees, r.current) for r in rows] == [(False, False), (True, True)]
    assert agreement_of(7, "onboarding-v1").agree == 1
    assert agreement_of(7, "onboarding-v1").disagree == 0


def test_the_owner_may_record_and_an_approver_who_is_not_may_not(world):
    assert _record(world, world["cases"][0], actor=world["dana"]).recorded_by == world["dana"]
    with pytest.raises(ObservationRefused):
        _record(world, world["cases"][1], actor=world["alice"])
    assert ObservedOutcome.objects.count() == 1


def test_a_case_of_another_workspace_is_unknown_here(world):
    with pytest.raises(InvalidPayload, match="no observed case"):
        _record(world, world["foreign_case"])
    assert not ObservedOutcome.objects.exists()


def _csv(*lines: str) -> bytes:
    return (
        "\n".join(["action_key,task_created,receiver,outcome,reference", *lines]) + "\n"
    ).encode()


def test_a_csv_import_records_every_row(world):
    a, b, c = world["cases"]
    rows = observed_outcomes_import(
        workspace_id=7,
        rule_version="onboarding-v1",
        data=_csv(f"{a},yes,,done by hand,OPS-1", f"{b},no,,phoned,", f"{c},yes,receiver,,"),
        actor=world["olga"],
    )
    assert [r.agrees for r in rows] == [True, False, True]
    assert ObservedOutcome.objects.get(action_key=a).reference == "OPS-1"


@pytest.mark.parametrize(
    ("bad_row", "reason"),
    [
        ("onboarding:7:999:1,yes,,,", "row 3: no observed case 'onboarding:7:999:1'"),
        ("{foreign},yes,,,", "row 3: no observed case"),
        ("{b},maybe,,,", "row 3: task_created is 'maybe'"),
        ("{b},yes", "row 3: 2 cells where the header has 5"),
        ("{a},no,,,", "row 3: case 'onboarding:7:42:1' is also on row 2"),
    ],
)
def test_a_csv_with_one_bad_row_is_refused_whole_naming_the_row(world, bad_row, reason):
    a, b, _ = world["cases"]
    bad = bad_row.format(a=a, b=b, foreign=world["foreign_case"])
    with pytest.raises(InvalidPayload) as refused:
        observed_outcomes_import(
            workspace_id=7,
            rule_version="onboarding-v1",
            data=_csv(f"{a},yes,,,", bad),
            actor=world["olga"],
        )
    assert any(r.startswith(reason) for r in refused.value.reasons), refused.value.reasons
    assert not ObservedOutcome.objects.exists()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"key,created\nx,yes\n", "row 1: the header has no action_key column"),
        (b"\xff\xfe not text", "the file is not UTF-8 text"),
        (b"action_key,task_created\n", "the file has no rows under its header"),
        (b"a" * (MAX_BYTES + 1), "the file is larger than"),
    ],
)
def test_a_file_that_is_not_an_outcomes_csv_is_refused(world, data, reason):
    with pytest.raises(InvalidPayload) as refused:
        observed_outcomes_import(
            workspace_id=7, rule_version="onboarding-v1", data=data, actor=world["olga"]
        )
    assert refused.value.reasons[0].startswith(reason)
    assert not ObservedOutcome.objects.exists()


def test_only_the_owner_explains_a_disagreement(world):
    row = _record(world, world["cases"][0], created=False)
    with pytest.raises(ObservationRefused):
        observed_outcome_explain(
            workspace_id=7, outcome_id=row.pk, explanation="x", actor=world["olga"]
        )
    observed_outcome_explain(
        workspace_id=7, outcome_id=row.pk, explanation="phone closures", actor=world["dana"]
    )
    assert agreement_of(7, "onboarding-v1").unexplained == 0


def _go_live(world, actor, confirmation="onboarding"):
    return workflow_go_live(workflow="onboarding", actor=actor, confirmation=confirmation)


def test_going_live_is_refused_to_anyone_but_the_owner(world):
    _record(world, world["cases"][0])
    with pytest.raises(GoLiveRefused, match="only onboarding's owner, dana"):
        _go_live(world, world["olga"])
    assert WorkflowMode.objects.get(workflow="onboarding").mode == Mode.OBSERVE


def test_going_live_is_refused_while_a_disagreement_is_unexplained_or_nothing_is_compared(world):
    with pytest.raises(GoLiveRefused, match="no observed case has a recorded outcome"):
        _go_live(world, world["dana"])
    _record(world, world["cases"][0], created=False)
    with pytest.raises(GoLiveRefused, match="1 disagreement"):
        _go_live(world, world["dana"])
    with pytest.raises(GoLiveRefused, match="type the workflow's name"):
        row = ObservedOutcome.objects.get()
        observed_outcome_explain(
            workspace_id=7, outcome_id=row.pk, explanation="ok", actor=world["dana"]
        )
        _go_live(world, world["dana"], confirmation="yes")
    assert WorkflowMode.objects.get(workflow="onboarding").mode == Mode.OBSERVE
    assert not WorkflowModeChange.objects.exists()


def test_the_owner_confirms_and_the_switch_is_audited_with_the_results(world):
    _record(world, world["cases"][0])
    _go_live(world, world["dana"])
    assert WorkflowMode.objects.get(workflow="onboarding").mode == Mode.LIVE
    change = WorkflowModeChange.objects.get()
    assert (change.from_mode, change.to_mode, change.changed_by) == (
        "observe",
        "live",
        world["dana"],
    )
    assert "4 case(s) observed, 1 compared, 1 agree, 0 disagree" in change.reason
    assert workflow_agreement("onboarding").observed == 4


def test_the_pilot_brief_is_set_by_someone_who_may_change_modes_only(world):
    root = get_user_model().objects.create_superuser("root", password="x-long-enough-pw")
    brief = pilot_brief_set(
        workflow="onboarding", owner=world["olga"], exception_path="olga, by hand", actor=root
    )
    assert (brief.owner, brief.exception_path, brief.updated_by) == (
        world["olga"],
        "olga, by hand",
        root,
    )
    with pytest.raises(ApprovalDenied):
        pilot_brief_set(
            workflow="onboarding", owner=world["dana"], exception_path="", actor=world["dana"]
        )
    assert PilotBrief.objects.get(workflow="onboarding").owner == world["olga"]


def _admin_go_live(client, world, **form):
    mode = WorkflowMode.objects.get(workflow="onboarding")
    return client.post(
        f"/admin/approvals/workflowmode/{mode.pk}/change/",
        {"mode": "live", "reason": "all in", **form},
    )


def test_admin_goes_live_only_with_the_owners_typed_confirmation(world, client):
    # Issue 37 item 10: with one disagreement unexplained, a POST to the admin's change page set the mode
    # to live without the owner. The admin now asks what the go-live page asks.
    root = get_user_model().objects.create_superuser("root", password="x-long-enough-pw")
    dana = world["dana"]
    dana.is_staff = dana.is_superuser = True
    dana.save()
    _record(world, world["cases"][0], created=False)  # one disagreement, unexplained
    client.force_login(root)
    refused = _admin_go_live(client, world, confirmation="onboarding")
    assert refused.status_code == 200
    assert "only onboarding&#x27;s owner, dana" in refused.content.decode()
    client.force_login(dana)
    refused = _admin_go_live(client, world, confirmation="onboarding")
    assert (
        refused.status_code == 200
        and "1 disagreement(s) are not explained" in refused.content.decode()
    )
    row = ObservedOutcome.objects.get()
    observed_outcome_explain(
        workspace_id=7, outcome_id=row.pk, explanation="phone closures", actor=dana
    )
    refused = _admin_go_live(client, world)
    assert refused.status_code == 200
    assert "type the workflow&#x27;s name, onboarding, to confirm" in refused.content.decode()
    assert WorkflowMode.objects.get(workflow="onboarding").mode == Mode.OBSERVE
    assert not WorkflowModeChange.objects.exists()
    assert _admin_go_live(client, world, confirmation="onboarding").status_code == 302
    assert WorkflowMode.objects.get(workflow="onboarding").mode == Mode.LIVE
    change = WorkflowModeChange.objects.get()
    assert (change.from_mode, change.to_mode, change.changed_by) == ("observe", "live", dana)
    assert change.reason.startswith("the owner confirmed going live on the observed results")
    assert change.reason.endswith("; all in")
