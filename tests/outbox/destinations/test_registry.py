"""The registry: destinations built from their rows (cached, rebuilt when a row changes), the default one
seeded from settings while no row of its name exists, and every way a destination cannot be used refused
with its name and reason."""

import pytest
from django.test import override_settings
from standardwebhooks.webhooks import Webhook

from outbox.destinations.http.destination import HttpDestination
from outbox.destinations.in_process.destination import InProcessDestination
from outbox.destinations.registry import (
    DestinationDisabled,
    DestinationInvalid,
    DestinationUnknown,
    default_destination_name,
    destination_named,
    destination_problems,
    enabled_destination_names,
    get_destination,
)
from outbox.models import DestinationConfig

pytestmark = pytest.mark.django_db
SECRET = "whsec_" + "c2VjcmV0LWZvci10aGUtcmVnaXN0cnktdGVzdHMhIQ=="
OTHER_SECRET = "whsec_" + "YW5vdGhlci1zZWNyZXQtZm9yLXJlZ2lzdHJ5LXRlc3Q="


def row(name: str, kind: str = "in_process", enabled: bool = True, **config) -> DestinationConfig:
    return DestinationConfig.objects.create(name=name, kind=kind, enabled=enabled, config=config)


def test_without_rows_the_default_destination_is_the_seed_from_settings():
    destination = get_destination()
    assert isinstance(destination, InProcessDestination)
    assert destination.name == default_destination_name() == "receiver"
    assert enabled_destination_names() == ["receiver"]


def test_the_seed_takes_its_name_from_settings(settings):
    with override_settings(HANDOFF_DESTINATION={**settings.HANDOFF_DESTINATION, "name": "crm"}):
        assert get_destination().name == "crm"
        assert enabled_destination_names() == ["crm"]


def test_a_row_is_built_once_and_rebuilt_when_it_changes():
    config = row("crm", supports_lookup=True)
    first = destination_named("crm")
    assert first.name == "crm" and first.supports_lookup
    assert destination_named("crm") is first
    config.config = {"supports_lookup": False}
    config.save()
    rebuilt = destination_named("crm")
    assert rebuilt is not first and not rebuilt.supports_lookup


def test_a_row_of_the_default_name_replaces_the_seed():
    row("receiver", supports_idempotency=False)
    assert get_destination().supports_idempotency is False


def test_unknown_and_disabled_names_are_refused_by_name():
    row("billing", enabled=False)
    with pytest.raises(DestinationUnknown, match="'nowhere'"):
        destination_named("nowhere")
    with pytest.raises(DestinationDisabled, match="'billing' is disabled"):
        destination_named("billing")


def test_enabled_names_are_the_enabled_rows_and_the_seed_while_it_has_no_row():
    row("crm")
    row("billing", enabled=False)
    assert enabled_destination_names() == ["crm", "receiver"]
    row("receiver", enabled=False)
    assert enabled_destination_names() == ["crm"]


def test_problems_name_each_enabled_destination_that_cannot_be_built():
    row("fax", kind="fax_machine")
    row("crm", supports_lookups=True)  # misspelled
    row("off", kind="fax_machine", enabled=False)
    problems = destination_problems()
    assert set(problems) == {"fax", "crm"}
    assert "unknown kind 'fax_machine'" in problems["fax"]
    assert "supports_lookups" in problems["crm"]


def test_http_configuration_refuses_a_misspelled_key_by_name():
    with pytest.raises(ValueError, match="read_timout"):
        HttpDestination.from_config({"url": "http://127.0.0.1:9", "read_timout": 5})


def test_http_configuration_refuses_a_secret_given_as_a_value():
    with pytest.raises(ValueError, match="signing_secret.*secret_env"):
        HttpDestination.from_config({"url": "http://127.0.0.1:9", "signing_secret": SECRET})


def test_http_configuration_refuses_a_missing_secret_variable_by_name(monkeypatch):
    monkeypatch.delenv("HANDOFF_DEST_CRM_SIGNING_SECRET", raising=False)
    row("crm", kind="http", url="http://127.0.0.1:9", secret_env="HANDOFF_DEST_CRM_SIGNING_SECRET")
    with pytest.raises(DestinationInvalid, match="HANDOFF_DEST_CRM_SIGNING_SECRET is not set"):
        destination_named("crm")


def test_http_signing_secret_is_read_from_its_variable_at_each_call(monkeypatch):
    monkeypatch.setenv("HANDOFF_DEST_CRM_SIGNING_SECRET", SECRET)
    row("crm", kind="http", url="http://127.0.0.1:9", secret_env="HANDOFF_DEST_CRM_SIGNING_SECRET")
    destination = destination_named("crm")
    headers = destination._signed('{"a": 1}')
    Webhook(SECRET).verify('{"a": 1}', headers)
    # Rotated in the environment: the next call signs with the new secret, no rebuild.
    monkeypatch.setenv("HANDOFF_DEST_CRM_SIGNING_SECRET", OTHER_SECRET)
    assert destination_named("crm") is destination
    Webhook(OTHER_SECRET).verify('{"a": 1}', destination._signed('{"a": 1}'))
