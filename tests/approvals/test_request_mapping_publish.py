"""Request mapping (issue 35), published: a step's `request` is checked when a workflows file is checked or
applied, rendered over a sample of the schema; what cannot render is refused, naming the step and the field,
and nothing is written."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from approvals.errors import InvalidPayload
from approvals.models import RuleVersion
from approvals.rules import rules_for
from tests.approvals.request_mapping_world import (
    ACCOUNT,
    CONTACT,
    apply,
    crm_row,
    mapping_world,
    step,
    workflows,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def world(monkeypatch):
    return mapping_world(monkeypatch)


def test_a_workflows_file_with_a_mapping_applies(world):
    crm_row()

    apply(world, workflows(step("create_account", ACCOUNT), step("create_contact", CONTACT)))

    steps = rules_for("onboarding").steps
    assert [s["request"] for s in steps] == [ACCOUNT, CONTACT]


@pytest.mark.parametrize(
    ("request_mapping", "problem"),
    [
        (
            {"path": {"object": "Account"}, "body": {"Name": {"$": "join('-', [plan"}}},
            "workflows[0] (onboarding): steps[1].request.body.Name: \"join('-', [plan\" is not a "
            "JMESPath expression",
        ),
        (
            {"path": {"object": "Account"}, "body": {"Name": {"$": "client_nam"}}},
            "workflows[0] (onboarding): steps[1].request.body.Name: client_nam is missing",
        ),
        (
            # Optional in the schema and without a default: some payloads would not render.
            {"path": {"object": "Account"}, "body": {"Description": {"$": "notes"}}},
            "workflows[0] (onboarding): steps[1].request.body.Description: notes is missing",
        ),
        (
            {"path": {"object": "Account"}, "headers": {"X-Plan": {"$": "[plan]"}}},
            "workflows[0] (onboarding): steps[1].request.headers.X-Plan: must render to a text "
            "or a number, not list",
        ),
        (
            {"body": {"Name": {"$": "client_name"}}},
            "workflows[0] (onboarding): steps[1].request.path: no value for {object} of "
            "create.path of 'crm'",
        ),
    ],
)
def test_a_mapping_that_cannot_render_is_refused_naming_the_step(world, request_mapping, problem):
    crm_row()
    versions = RuleVersion.objects.count()

    with pytest.raises(InvalidPayload) as refused:
        apply(world, workflows(step("create_account", ACCOUNT), step("bad", request_mapping)))

    assert any(reason.startswith(problem) for reason in refused.value.reasons), refused.value
    assert RuleVersion.objects.count() == versions


def test_the_workflows_command_checks_and_applies_a_file_with_mappings(world, tmp_path):
    crm_row()
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(workflows(step("create_account", {**ACCOUNT, "body": {"N": {"$": "x"}}})))
    )
    good = tmp_path / "good.json"
    good.write_text(json.dumps(workflows(step("create_account", ACCOUNT))))
    versions = RuleVersion.objects.count()

    with pytest.raises(CommandError, match=r"steps\[0\]\.request\.body\.N: x is missing"):
        call_command("workflows", "check", str(bad), stdout=StringIO())
    with pytest.raises(CommandError, match=r"steps\[0\]\.request\.body\.N: x is missing"):
        call_command("workflows", "apply", str(bad), stdout=StringIO())
    assert RuleVersion.objects.count() == versions
    call_command("workflows", "apply", str(good), stdout=StringIO())

    assert rules_for("onboarding").steps[0]["request"] == ACCOUNT


def test_a_mapping_to_a_kind_that_sends_the_payload_as_it_is_is_refused(world):
    with pytest.raises(InvalidPayload) as refused:
        apply(world, workflows(step("create_client", ACCOUNT, destination="receiver")))

    assert refused.value.reasons == [
        "workflows[0] (onboarding): steps[0].request: destination 'receiver' sends the approved "
        "payload as it is; a request mapping needs an idempotency_key_http or smtp destination"
    ]
