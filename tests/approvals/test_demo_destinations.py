"""`manage.py demo --destinations demo/destinations.json` (what `make run` runs): the three destinations
are rows, and the onboarding's steps go to them."""

import html
import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from approvals.rules import rules_for
from approvals.services.rule_versions import rule_version_publish
from delivery.models import Account
from outbox.destinations.registry import destination_from_config, destination_named
from outbox.failures import Outgoing, UndoTarget
from outbox.models import DestinationConfig
from outbox.payloads import payload_hash
from tests.console.clients import client_for
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


def test_alices_approval_page_shows_what_each_demo_destination_will_receive(monkeypatch):
    monkeypatch.setenv("PORT", "8123")
    call_command("demo", destinations=str(ROOT / "demo" / "destinations.json"), stdout=StringIO())

    page = html.unescape(
        client_for(get_user_model().objects.get(username="alice"))
        .get(reverse("approvals:detail", args=[7, 42, 1]))
        .content.decode()
    )

    assert "What each destination will receive" in page
    assert "Step provision_account → accounts · <code>POST /v1/accounts</code>" in page
    assert '"account": {\n    "name": "Northwind Traders",\n    "notes": "Kick-off call' in page
    assert '"plan": "standard"\n  }\n}</pre>' in page
    assert "Step create_client → receiver" in page
    assert page.count("The proposed operation above, as it is.") == 2


def test_a_second_demo_run_maps_the_accounts_step_of_a_routed_older_demo(monkeypatch):
    demo = {"destinations": str(ROOT / "demo" / "destinations.json"), "stdout": StringIO()}
    call_command("demo", **demo)
    # The demo as a load before the mapping published it: routed, nothing mapped.
    unmapped = [
        {k: v for k, v in step.items() if k != "request"} for step in rules_for("onboarding").steps
    ]
    rule_version_publish(
        workflow="onboarding", schema=rules_for("onboarding").schema, steps=unmapped, actor=None
    )
    assert "request" not in rules_for("onboarding").steps[1]

    call_command("demo", **demo)

    assert rules_for("onboarding").steps[1]["request"]["body"]["account"]["name"] == {
        "$": "client_name"
    }


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
