"""`manage.py demo --destinations demo/destinations.json` (what `make run` runs): the three destinations
are rows, and the onboarding's steps go to them."""

from io import StringIO

import pytest
from django.core.management import call_command

from approvals.rules import rules_for
from outbox.destinations.registry import destination_named
from outbox.models import DestinationConfig
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_the_demo_publishes_three_destinations_and_routes_each_step_to_its_own(monkeypatch):
    monkeypatch.setenv("PORT", "8123")
    call_command("demo", destinations=str(ROOT / "demo" / "destinations.json"), stdout=StringIO())
    rows = dict(DestinationConfig.objects.values_list("name", "kind"))
    assert rows == {"receiver": "http", "accounts": "idempotency_key_http", "welcome-mail": "smtp"}
    assert DestinationConfig.objects.get(name="receiver").config["url"] == (
        "http://127.0.0.1:8123/delivery/api"
    )
    steps = {step["name"]: step["destination"] for step in rules_for("onboarding").steps}
    assert steps == {
        "create_client": "receiver",
        "provision_account": "accounts",
        "send_welcome_pack": "welcome-mail",
    }
    for name in rows:
        assert destination_named(name).name == name


def test_a_second_demo_run_with_destinations_routes_the_steps_of_an_older_demo(monkeypatch):
    call_command("demo", stdout=StringIO())
    assert not rules_for("onboarding").steps[0].get("destination")
    call_command("demo", destinations=str(ROOT / "demo" / "destinations.json"), stdout=StringIO())
    assert rules_for("onboarding").steps[0]["destination"] == "receiver"
