"""`manage.py destinations apply | list | check`, the lease rule checked against each destination's own
timeouts, and `manage.py dispatch --once` holding a destination that cannot be built while it serves the
rest (refusing to start only when none can be)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from outbox.models import (
    DestinationConfig,
    DestinationEvent,
    DestinationHealth,
    DestinationState,
    PauseReason,
)
from tests.processes import ROOT

pytestmark = pytest.mark.django_db
SECRET_VALUE = "whsec_" + "dGhlLWNybS1zZWNyZXQtdmFsdWUtbmV2ZXItc2hvd24h"
CRM = {
    "name": "crm",
    "kind": "http",
    "enabled": True,
    "url": "http://127.0.0.1:9/crm",
    "secret_env": "HANDOFF_DEST_CRM_SIGNING_SECRET",
    "read_timeout": 4.0,
}
FAST = {"name": "fast", "kind": "in_process", "supports_lookup": False}


@pytest.fixture(autouse=True)
def crm_secret(monkeypatch):
    monkeypatch.setenv("HANDOFF_DEST_CRM_SIGNING_SECRET", SECRET_VALUE)


def run(*args) -> str:
    out = StringIO()
    call_command("destinations", *args, stdout=out)
    return out.getvalue()


def apply(tmp_path, *entries) -> str:
    path = tmp_path / "destinations.json"
    path.write_text(json.dumps({"destinations": list(entries)}))
    return run("apply", str(path))


def test_apply_creates_the_rows_and_audits_each(tmp_path):
    out = apply(tmp_path, CRM, FAST)
    assert "2 destination(s) changed" in out
    crm = DestinationConfig.objects.get(name="crm")
    assert (crm.kind, crm.enabled) == ("http", True)
    assert crm.config == {
        "url": "http://127.0.0.1:9/crm",
        "secret_env": "HANDOFF_DEST_CRM_SIGNING_SECRET",
        "read_timeout": 4.0,
    }
    events = {e.destination: e for e in DestinationEvent.objects.all()}
    assert set(events) == {"crm", "fast"}
    assert events["crm"].actor_label == "manage.py destinations"
    assert events["crm"].reason.startswith("created: kind http, enabled")
    assert "secret_env='HANDOFF_DEST_CRM_SIGNING_SECRET'" in events["crm"].reason
    assert SECRET_VALUE not in out + "".join(e.reason for e in events.values())


def test_apply_again_changes_only_what_differs_and_says_what(tmp_path):
    apply(tmp_path, CRM, FAST)
    assert "0 destination(s) changed" in apply(tmp_path, CRM, FAST)
    assert DestinationEvent.objects.count() == 2
    apply(tmp_path, {**CRM, "url": "http://127.0.0.1:9/crm2", "enabled": False}, FAST)
    [change] = DestinationEvent.objects.filter(destination="crm").order_by("-id")[:1]
    assert change.reason == "disabled; url 'http://127.0.0.1:9/crm' -> 'http://127.0.0.1:9/crm2'"
    assert DestinationConfig.objects.get(name="crm").enabled is False


def test_a_refused_file_names_every_problem_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("HANDOFF_DEST_BILLING_SECRET", raising=False)
    apply(tmp_path, FAST)
    before = list(DestinationConfig.objects.values_list("name", "kind", "config"))
    with pytest.raises(CommandError) as refused:
        apply(
            tmp_path,
            {**FAST, "supports_lookup": True},  # a valid change, not applied either
            {"name": "fax", "kind": "fax_machine"},
            {**CRM, "read_timout": 4.0},
            {**CRM, "name": "billing", "secret_env": "HANDOFF_DEST_BILLING_SECRET"},
        )
    message = str(refused.value)
    assert "nothing applied" in message
    assert "unknown kind 'fax_machine'" in message
    assert "read_timout" in message
    assert "HANDOFF_DEST_BILLING_SECRET is not set" in message
    assert list(DestinationConfig.objects.values_list("name", "kind", "config")) == before
    assert DestinationEvent.objects.count() == 1


def test_apply_refuses_a_secret_given_as_a_value(tmp_path):
    with pytest.raises(CommandError, match="signing_secret"):
        apply(tmp_path, {**CRM, "signing_secret": SECRET_VALUE})
    assert not DestinationConfig.objects.exists()


def test_list_shows_each_destination_its_secrets_presence_and_contract(tmp_path, monkeypatch):
    apply(tmp_path, CRM, {**FAST, "enabled": False})
    out = run("list")
    assert "crm  kind=http  enabled  secrets: $HANDOFF_DEST_CRM_SIGNING_SECRET present" in out
    assert "lookup by GET /tasks/<key>" in out
    assert "fast  kind=in_process  disabled" in out
    assert "receiver (seed from settings)  kind=in_process  enabled" in out
    monkeypatch.delenv("HANDOFF_DEST_CRM_SIGNING_SECRET")
    out = run("list")
    assert (
        "$HANDOFF_DEST_CRM_SIGNING_SECRET MISSING" in out
        and "HANDOFF_DEST_CRM_SIGNING_SECRET is not set" in out
    )
    assert SECRET_VALUE not in out


def test_check_names_every_enabled_destination_that_cannot_be_built(tmp_path, monkeypatch):
    apply(tmp_path, CRM, FAST)
    assert "ok  crm at http://127.0.0.1:9/crm" in run("check")
    DestinationConfig.objects.create(name="fax", kind="fax_machine")
    DestinationConfig.objects.create(name="off", kind="fax_machine", enabled=False)
    monkeypatch.delenv("HANDOFF_DEST_CRM_SIGNING_SECRET")
    with pytest.raises(CommandError) as refused:
        run("check")
    message = str(refused.value)
    assert "2 destination(s) cannot be served" in message
    assert "'fax'" in message and "HANDOFF_DEST_CRM_SIGNING_SECRET is not set" in message
    assert "'off'" not in message


def test_dispatch_once_holds_a_destination_that_cannot_be_built_and_serves_the_rest():
    DestinationConfig.objects.create(
        name="crm", kind="http", config={"url": "http://x", "retries": 3}
    )
    err = StringIO()
    call_command("dispatch", "--once", stdout=StringIO(), stderr=err)
    assert "not serving crm (held, its handoffs wait): destination 'crm'" in err.getvalue()
    health = DestinationHealth.objects.get(name="crm")
    assert (health.state, health.pause_reason) == (DestinationState.PAUSED, PauseReason.UNSERVABLE)
    assert "retries" in health.last_error


def test_dispatch_refuses_to_start_when_no_enabled_destination_can_be_built():
    DestinationConfig.objects.create(name="receiver", kind="in_process", enabled=False)
    DestinationConfig.objects.create(
        name="crm", kind="http", config={"url": "http://x", "retries": 3}
    )
    with pytest.raises(CommandError, match="cannot dispatch: .*'crm'.*retries"):
        call_command("dispatch", "--once", stdout=StringIO())
    assert not DestinationHealth.objects.filter(name="crm").exists()


# The outside test's numbers: a 3 s lease, one call of 2 + 5 s; every call outlived its lease.
SLOW = {**CRM, "name": "acme", "connect_timeout": 2, "read_timeout": 5}


def test_apply_refuses_timeouts_a_call_may_outlive_its_lease_with_naming_the_field(
    tmp_path, settings
):
    settings.HANDOFF_LEASE_SECONDS = 3
    with pytest.raises(CommandError) as refused:
        apply(tmp_path, FAST, SLOW)
    message = str(refused.value)
    assert "nothing applied" in message
    assert (
        "destinations[1] (acme).read_timeout: one call may take connect_timeout + read_timeout"
        in (message)
    )
    assert "= 7 s, not less than the lease (HANDOFF_LEASE_SECONDS=3 s)" in message
    assert not DestinationConfig.objects.exists()
    settings.HANDOFF_LEASE_SECONDS = 8
    assert "2 destination(s) changed" in apply(tmp_path, FAST, SLOW)


def test_check_refuses_a_row_whose_own_timeouts_outlast_the_lease(settings):
    DestinationConfig.objects.create(
        name="acme",
        kind="http",
        config={k: v for k, v in SLOW.items() if k not in ("name", "kind", "enabled")},
    )
    settings.HANDOFF_LEASE_SECONDS = 3
    with pytest.raises(CommandError) as refused:
        run("check")
    message = str(refused.value)
    assert "1 destination(s) cannot be served" in message
    assert (
        "destination 'acme': read_timeout: one call may take connect_timeout + read_timeout = 7 s"
        in (message)
    )
    settings.HANDOFF_LEASE_SECONDS = 8
    assert "ok  acme at" in run("check")


def test_the_seed_is_held_to_the_lease_rule_by_its_own_settings(settings):
    settings.HANDOFF_DESTINATION = {
        "kind": "http",
        "name": "receiver",
        "url": "http://127.0.0.1:9/delivery/api",
        "connect_timeout": 2.0,
        "read_timeout": 5.0,
    }
    settings.HANDOFF_LEASE_SECONDS = 3
    with pytest.raises(CommandError, match="'receiver': read_timeout: .* = 7 s"):
        run("check")


def test_the_documented_example_file_applies(tmp_path, monkeypatch):
    doc = (ROOT / "docs" / "destinations" / "model.md").read_text()
    example = doc.split("```json\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("HANDOFF_DEST_ACCOUNTS_TOKEN", "token-of-the-test")
    path = tmp_path / "example.json"
    path.write_text(example)
    assert "3 destination(s) changed" in run("apply", str(path))
    assert sorted(DestinationConfig.objects.values_list("kind", flat=True)) == [
        "http",
        "idempotency_key_http",
        "smtp",
    ]


def test_list_says_a_rotations_previous_secret_is_optional_when_unset(monkeypatch):
    from outbox.destinations.registry import secret_sources

    monkeypatch.setenv(
        "HANDOFF_DEST_CRM_SIGNING_SECRET", "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"
    )
    monkeypatch.delenv("HANDOFF_DEST_CRM_SIGNING_SECRET_PREVIOUS", raising=False)
    sources = secret_sources(
        {
            "kind": "http",
            "secret_env": "HANDOFF_DEST_CRM_SIGNING_SECRET",
            "previous_secret_env": "HANDOFF_DEST_CRM_SIGNING_SECRET_PREVIOUS",
        }
    )
    states = {s.where: s.state for s in sources}
    assert states == {
        "$HANDOFF_DEST_CRM_SIGNING_SECRET": "present",
        "$HANDOFF_DEST_CRM_SIGNING_SECRET_PREVIOUS": "not set (used only during a rotation)",
    }
