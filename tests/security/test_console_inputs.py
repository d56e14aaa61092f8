"""Hostile values in console query strings and bulk filters: a 4xx with the reason, never a 500, nothing done."""

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from approvals.errors import InvalidPayload
from approvals.rules import ONBOARDING_V1, schema_problems
from approvals.services import rule_version_publish
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.services import handoff_record
from tests.factories import make_user, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world():
    return onboarding_world()


def signed_in(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("/approvals/?after=2024-13-45T00:00:00_1", b"after is not a cursor"),
        (
            "/approvals/?after=2024-01-01T00:00:00_99999999999999999999999",
            b"after must be a whole number",
        ),
        ("/approvals/?workspace=99999999999999999999999", b"workspace must be a whole number"),
        ("/approvals/?workspace=-1", b"workspace must be a whole number"),
        (
            "/approvals/api/triggers/?before=999999999999999999999999999999-1",
            b"before is not a cursor",
        ),
        (
            "/approvals/api/triggers/?before=2024-01-01T00:00:00_99999999999999999999999",
            b"before must be a whole number",
        ),
        ("/approvals/api/triggers/?before=abc_1", b"before is not a cursor"),
    ],
)
def test_malformed_cursors_and_ids_are_a_400_with_the_reason(world, url, reason):
    response = signed_in(world["alice"]).get(url)
    assert response.status_code == 400
    assert reason in response.content


@pytest.mark.parametrize(
    "after", ["2024-13-45T00:00:00_1", "2024-01-01T00:00:00_99999999999999999999999", "x_y"]
)
def test_malformed_cursor_on_the_handoff_list_restarts_at_the_first_page(world, after):
    response = signed_in(world["olga"]).get("/handoffs/", {"after": after})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "params",
    [
        {"workspace": "99999999999999999999999"},
        {"owner": "99999999999999999999999"},
        {"state": "delivered'--"},
    ],
)
def test_out_of_range_filters_on_the_handoff_list_are_not_a_500(world, params):
    assert signed_in(world["olga"]).get("/handoffs/", params).status_code == 200


def attention_handoff(workspace_id: int, number: int) -> Handoff:
    handoff = handoff_record(
        workflow="onboarding",
        workspace_id=workspace_id,
        source_ref=f"request {number} revision 1",
        source_id=number,
        action_key=f"onboarding:{workspace_id}:{number}:1",
        payload={"client_name": "x"},
        rule_version="onboarding-v1",
        owner=None,
        actor=None,
    )
    Handoff.objects.filter(pk=handoff.pk).update(
        state=HandoffState.NEEDS_ATTENTION, failure_class="transient"
    )
    return handoff


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("workspace", "8"),
        ("state", "delivered'--"),
        ("workspace", "99999999999999999999999"),
        ("owner", "424242"),
        ("failure_class", "nope"),
        ("age", "forever"),
    ],
)
def test_bulk_with_a_foreign_or_invalid_filter_is_a_422_and_does_nothing(world, field, value):
    mine = [attention_handoff(7, 500), attention_handoff(7, 501)]
    attention_handoff(8, 502)
    events_before = HandoffEvent.objects.count()
    client = signed_in(world["olga"])
    for extra in ({}, {"bulk_confirm": "1", "bulk_upto": str(max(h.pk for h in mine) + 10)}):
        response = client.post(
            "/handoffs/bulk", {"bulk_action": "reconcile", field: value, **extra}
        )
        assert response.status_code == 422
        assert b"Nothing was done" in response.content and field.encode() in response.content
    assert HandoffEvent.objects.count() == events_before
    assert set(Handoff.objects.values_list("state", flat=True)) == {HandoffState.NEEDS_ATTENTION}


def test_bulk_with_a_valid_filter_still_applies(world):
    mine = attention_handoff(7, 500)
    response = signed_in(world["olga"]).post(
        "/handoffs/bulk",
        {
            "bulk_action": "reconcile",
            "workspace": "7",
            "bulk_confirm": "1",
            "bulk_upto": str(mine.pk),
        },
    )
    assert response.status_code == 200 and b"Reconciled 1 of 1" in response.content


# --- Regular expressions in published rules -------------------------------------------------------

CATASTROPHIC = {
    **ONBOARDING_V1.schema,
    "properties": {
        **ONBOARDING_V1.schema["properties"],
        "client_name": {"type": "string", "pattern": "(a+)+$"},
    },
}


def test_a_catastrophic_pattern_is_evaluated_in_linear_time():
    """Under a backtracking engine this check takes longer than the age of the universe; under RE2 it is
    immediate. It runs in a child process so that a regression fails on the timeout instead of hanging."""
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.test_settings'); "
        "django.setup(); import json, sys; from approvals.rules import schema_problems; "
        "schema = json.loads(sys.argv[1]); "
        "print(schema_problems(schema, {'client_name': 'a' * 5000 + '!', 'contact_email': 'x@y.z', "
        "'plan': 'starter'}))"
    )
    import json

    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(CATASTROPHIC)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "does not match '(a+)+$'" in result.stdout


def test_patterns_still_match_what_they_should():
    payload = {"client_name": "aaaa", "contact_email": "x@y.z", "plan": "starter"}
    assert schema_problems(CATASTROPHIC, payload) == []


def test_a_pattern_with_a_back_reference_is_refused_at_publish_with_the_reason(world, tmp_path):
    from approvals.models import RuleVersion

    admin_user = make_user("root", is_staff=True, is_superuser=True)
    versions_before = RuleVersion.objects.count()
    schema = {
        "type": "object",
        "properties": {"client_name": {"type": "string", "pattern": r"(a)\1"}},
    }
    with pytest.raises(InvalidPayload) as refused:
        rule_version_publish(workflow="onboarding", schema=schema, actor=admin_user)
    assert "cannot be evaluated in linear time" in refused.value.reasons[0]
    path = tmp_path / "workflows.json"
    path.write_text(json.dumps({"workflows": [{"name": "onboarding", "schema": schema}]}))
    with pytest.raises(CommandError, match="cannot be evaluated in linear time"):
        call_command("workflows", "apply", str(path), stdout=StringIO())
    assert RuleVersion.objects.count() == versions_before
