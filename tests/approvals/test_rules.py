"""approvals/rules.py: the rules in force, why a payload fails them, and which rules may be published."""

import pytest

from approvals.models import RuleVersion
from approvals.rules import (
    ONBOARDING_V1,
    RuleSet,
    known_workflows,
    pattern_problems,
    payload_problems,
    publish_problems,
    rules_for,
    schema_problems,
)
from tests.factories import ONBOARDING_PAYLOAD

pytestmark = pytest.mark.django_db


def test_rules_in_force_are_the_newest_stored_version():
    assert rules_for("onboarding").version == "onboarding-v1"
    RuleVersion.objects.create(
        workflow="onboarding", number=2, version="onboarding-v2", schema={"type": "object"}
    )
    rules = rules_for("onboarding")
    assert (rules.version, rules.schema) == ("onboarding-v2", {"type": "object"})


def test_a_workflow_without_stored_rules_runs_under_its_built_in_rules():
    RuleVersion.objects.all().delete()
    assert rules_for("onboarding") == ONBOARDING_V1


def test_a_workflow_without_any_rules_is_unknown():
    with pytest.raises(LookupError):
        rules_for("offboarding")
    assert "offboarding" not in known_workflows()
    RuleVersion.objects.create(
        workflow="offboarding", number=1, version="offboarding-v1", schema={}
    )
    assert known_workflows() == {"onboarding", "offboarding"}


def test_a_payload_that_passes_the_rules_has_no_problems():
    assert payload_problems("onboarding", dict(ONBOARDING_PAYLOAD)) == []


def test_every_problem_of_a_payload_is_named_by_where_it_is():
    problems = payload_problems(
        "onboarding", {**ONBOARDING_PAYLOAD, "client_name": "", "plan": "gold"}
    )
    assert [p.split(":")[0] for p in problems] == ["client_name", "plan"]
    assert payload_problems("onboarding", ["not", "an", "object"])[0].startswith("payload: ")


def test_payload_problems_can_be_asked_under_given_rules():
    strict = RuleSet(
        workflow="onboarding", version="x", schema={"type": "object", "maxProperties": 1}
    )
    assert payload_problems("onboarding", dict(ONBOARDING_PAYLOAD), strict) != []


def test_schema_problems_prefix_and_root_name_the_document():
    assert schema_problems({"type": "string"}, 3, root="trigger") == [
        "trigger: 3 is not of type 'string'"
    ]
    assert schema_problems(
        {"properties": {"a": {"type": "string"}}}, {"a": 1}, prefix="payload."
    ) == ["payload.a: 1 is not of type 'string'"]


def test_patterns_run_in_linear_time_where_pythons_re_would_backtrack():
    schema = {"type": "string", "pattern": "^(a+)+$"}
    assert schema_problems(schema, "a" * 5000 + "!") != []
    assert schema_problems(schema, "a" * 5000) == []


def test_publishable_rules_have_no_problems():
    assert publish_problems(ONBOARDING_V1.schema) == []


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ([], "must be a JSON Schema object"),
        ({"type": "no-such-type"}, "not a valid JSON Schema"),
        ({"pattern": "(a)\\1"}, "cannot be evaluated in linear time"),
        ({"patternProperties": {"(?=x)": {}}}, "cannot be evaluated in linear time"),
        (
            {"patternProperties": {"^x": {}}, "unevaluatedProperties": False},
            "unevaluatedProperties cannot be combined",
        ),
    ],
)
def test_rules_that_cannot_be_published_say_why(schema, reason):
    problems = publish_problems(schema)
    assert len(problems) == 1 and reason in problems[0]


def test_pattern_problems_look_into_nested_schemas():
    nested = {"properties": {"a": {"items": [{"pattern": "(x)\\1"}]}}}
    assert len(pattern_problems(nested)) == 1
