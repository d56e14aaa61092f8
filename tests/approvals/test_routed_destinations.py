"""A destination that steps in force route to is not disabled until the routes change (issue 35, item 4):
its handoffs would wait forever while the page said "Queued for delivery. Nothing to do."."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from outbox.models import DestinationConfig, DestinationEvent
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def demo(monkeypatch):
    monkeypatch.setenv("PORT", "8123")
    call_command("demo", destinations=str(ROOT / "demo" / "destinations.json"), stdout=StringIO())


def _destinations(tmp_path, name: str, enabled: bool) -> str:
    document = json.loads(
        (ROOT / "demo" / "destinations.json")
        .read_text()
        .replace("@PORT@", "8123")
        .replace("@DEMO_SMTP_PORT@", "2525")
    )
    entry = next(e for e in document["destinations"] if e["name"] == name)
    path = tmp_path / "destinations.json"
    path.write_text(json.dumps({"destinations": [{**entry, "enabled": enabled}]}))
    return str(path)


def test_disabling_a_routed_destination_is_refused_naming_the_steps(demo, tmp_path):
    events = DestinationEvent.objects.count()
    with pytest.raises(CommandError) as refused:
        call_command("destinations", "apply", _destinations(tmp_path, "accounts", False))
    assert "(accounts).enabled: false, but steps in force route to it" in str(refused.value)
    assert "onboarding.provision_account" in str(refused.value)
    assert DestinationConfig.objects.get(name="accounts").enabled
    assert DestinationEvent.objects.count() == events


def test_once_no_step_routes_to_it_the_destination_is_disabled(demo, tmp_path):
    workflows = json.loads((ROOT / "demo" / "workflows.json").read_text())
    workflows["workflows"][0]["steps"][1]["destination"] = "receiver"
    # The receiver takes the approved payload as it is: the accounts envelope goes with the accounts route.
    workflows["workflows"][0]["steps"][1].pop("request")
    path = tmp_path / "workflows.json"
    path.write_text(json.dumps(workflows))
    call_command("workflows", "apply", str(path), stdout=StringIO())
    call_command(
        "destinations", "apply", _destinations(tmp_path, "accounts", False), stdout=StringIO()
    )
    assert not DestinationConfig.objects.get(name="accounts").enabled
