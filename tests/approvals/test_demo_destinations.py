"""`manage.py demo --destinations demo/destinations.json` (what `make run` runs): the three destinations
are rows, and the onboarding's steps go to them."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from approvals.rules import rules_for
from delivery.models import Account
from outbox.destinations.registry import destination_from_config, destination_named
from outbox.failures import Outgoing, UndoTarget
from outbox.models import DestinationConfig
from outbox.payloads import payload_hash
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


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_the_demos_account_compensation_closes_the_account_at_the_bundled_service(live_server):
    """The demo's accounts destination, as demo/destinations.json configures it, against the bundled
    accounts service over HTTP: the compensation sends its DELETE, never a second create."""
    text = (ROOT / "demo" / "destinations.json").read_text()
    port = live_server.url.rsplit(":", 1)[1]
    document = json.loads(text.replace("@PORT@", port).replace("@DEMO_SMTP_PORT@", "2525"))
    [config] = [d for d in document["destinations"] if d["name"] == "accounts"]
    destination = destination_from_config(config)
    step_key = "onboarding:7:42:1:provision_account"
    payload = {"client_name": "Northwind Traders", "operation": "provision_account"}
    try:
        created = destination.deliver(
            Outgoing(action_key=step_key, payload=payload, payload_hash=payload_hash(payload))
        )
        assert created.delivered and Account.objects.filter(idempotency_key=step_key).count() == 1
        undo_payload = {**payload, "operation": "deprovision_account"}
        undone = destination.deliver(
            Outgoing(
                action_key=f"{step_key}:compensate",
                payload=undo_payload,
                payload_hash=payload_hash(undo_payload),
                undo=UndoTarget(action_key=step_key, receipt_id=created.task_id),
            )
        )
    finally:
        destination.close()
    assert undone.delivered and undone.task_id == created.task_id
    # Counted at the service: no account for the step's key, and none made for the compensation's.
    assert Account.objects.filter(idempotency_key=step_key).count() == 0
    assert Account.objects.count() == 0
