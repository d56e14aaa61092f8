"""`manage.py workflows apply | check | list`: workflows and their routed steps kept in a file, published as
rule versions, never a step dropped silently, never a route to a destination nobody serves."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from approvals.errors import InvalidPayload
from approvals.models import RuleVersion
from approvals.rules import rules_for
from approvals.services.rule_versions import rule_version_publish
from outbox.models import DestinationConfig
from tests.factories import make_user
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
DEMO_WORKFLOWS = ROOT / "demo" / "workflows.json"


@pytest.fixture
def demo(monkeypatch):
    """The demo as `make run` loads it: three destinations, the onboarding routed to them."""
    monkeypatch.setenv("PORT", "8123")
    call_command("demo", destinations=str(ROOT / "demo" / "destinations.json"), stdout=StringIO())


def _file(tmp_path, document) -> str:
    path = tmp_path / "workflows.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def _demo_document() -> dict:
    return json.loads(DEMO_WORKFLOWS.read_text())


def _apply(path: str, *extra) -> str:
    out = StringIO()
    call_command("workflows", "apply", path, *extra, stdout=out)
    return out.getvalue()


def test_the_demo_workflows_file_is_what_the_demo_publishes(demo):
    versions = RuleVersion.objects.count()
    assert _apply(str(DEMO_WORKFLOWS)).startswith("onboarding: unchanged (onboarding-v")
    assert RuleVersion.objects.count() == versions


def test_a_changed_route_is_published_as_a_new_version_saying_which_step(demo, tmp_path):
    document = _demo_document()
    document["workflows"][0]["steps"][2]["destination"] = "receiver"
    said = _apply(_file(tmp_path, document), "--as", make_user("root", is_superuser=True).username)
    rules = rules_for("onboarding")
    assert (
        said.strip() == f"onboarding: published {rules.version}; steps changed: send_welcome_pack"
    )
    assert rules.steps[2]["destination"] == "receiver"
    assert RuleVersion.objects.get(version=rules.version).created_by.username == "root"


def test_a_step_missing_from_the_file_is_refused_until_the_file_names_it_removed(demo, tmp_path):
    document = _demo_document()
    del document["workflows"][0]["steps"][2]
    before = rules_for("onboarding").version
    with pytest.raises(CommandError) as refused:
        _apply(_file(tmp_path, document))
    assert "step 'send_welcome_pack' is in force and missing from the file" in str(refused.value)
    assert "workflows[0] (onboarding).removes" in str(refused.value)
    assert rules_for("onboarding").version == before
    document["workflows"][0]["removes"] = ["send_welcome_pack"]
    assert "steps removed: send_welcome_pack" in _apply(_file(tmp_path, document))
    assert [s["name"] for s in rules_for("onboarding").steps] == [
        "create_client",
        "provision_account",
    ]


@pytest.mark.parametrize("enabled_row", [False, None], ids=["disabled", "unknown"])
def test_a_route_to_a_destination_nobody_serves_is_refused_naming_the_step(
    demo, tmp_path, enabled_row
):
    document = _demo_document()
    if enabled_row is None:
        document["workflows"][0]["steps"][1]["destination"] = "crm-nobody-configured"
    else:
        DestinationConfig.objects.filter(name="accounts").update(enabled=False)
    before = RuleVersion.objects.count()
    with pytest.raises(CommandError, match=r"step 2 destination '[a-z-]+' is not an enabled"):
        _apply(_file(tmp_path, document))
    with pytest.raises(CommandError, match="step 2 destination"):
        call_command("workflows", "check", _file(tmp_path, document), stdout=StringIO())
    assert RuleVersion.objects.count() == before


def test_check_writes_nothing_and_a_duplicate_key_is_refused_with_its_place(demo, tmp_path):
    before = RuleVersion.objects.count()
    document = _demo_document()
    document["workflows"][0]["steps"][0]["destination"] = "accounts"
    out = StringIO()
    call_command("workflows", "check", _file(tmp_path, document), stdout=out)
    assert out.getvalue().endswith("can be applied\n")
    duplicated = '{"workflows": [{"name": "onboarding", "name": "other", "schema": {}}]}'
    with pytest.raises(CommandError, match=r"workflows\[0\]\.name: the key appears twice"):
        call_command("workflows", "check", _file(tmp_path, duplicated), stdout=StringIO())
    assert RuleVersion.objects.count() == before


def test_list_names_each_steps_destination(demo):
    out = StringIO()
    call_command("workflows", "list", stdout=out)
    assert "create_client -> receiver, provision_account -> accounts" in out.getvalue()


def test_admin_shows_rule_versions_and_names_the_file_but_publishes_nothing(demo):
    from django.test import Client

    root = make_user("root", is_superuser=True, is_staff=True)
    client = Client()
    client.force_login(root)
    assert client.get("/admin/approvals/ruleversion/add/").status_code == 403
    page = client.get("/admin/approvals/ruleversion/").content.decode()
    assert "manage.py workflows apply FILE" in page
    assert "send_welcome_pack → welcome-mail" in page


@pytest.mark.parametrize("marked", ["yes", 1, None], ids=["text", "number", "null"])
def test_an_x_searchable_that_is_not_a_boolean_is_refused_naming_the_field(demo, tmp_path, marked):
    document = _demo_document()
    document["workflows"][0]["schema"]["properties"]["client_name"]["x-searchable"] = marked
    before = RuleVersion.objects.count()
    where = r"workflows\[0\] \(onboarding\)\.schema\.properties\.client_name\.x-searchable"
    with pytest.raises(CommandError, match=where + ": true or false"):
        call_command("workflows", "check", _file(tmp_path, document), stdout=StringIO())
    with pytest.raises(CommandError, match=where):
        _apply(_file(tmp_path, document))
    assert RuleVersion.objects.count() == before


@pytest.mark.parametrize("name", ["incident", "incident_notifications"])
def test_a_workflow_may_not_take_a_name_the_alert_notifications_use(demo, tmp_path, name):
    """A business workflow named so would share the notifications' keys (`incident:…`) or workflow, and every
    count that leaves the notifications out would leave it out too."""
    document = _demo_document()
    document["workflows"][0]["name"] = name
    versions = RuleVersion.objects.count()
    with pytest.raises(
        CommandError, match=rf"workflows\[0\]\.name: workflow name '{name}' is reserved"
    ):
        _apply(_file(tmp_path, document))
    with pytest.raises(InvalidPayload, match="is reserved for the product's alert notifications"):
        rule_version_publish(workflow=name, schema=document["workflows"][0]["schema"], actor=None)
    assert RuleVersion.objects.count() == versions
