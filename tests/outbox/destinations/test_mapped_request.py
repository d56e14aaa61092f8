"""The idempotency_key_http kind sends a frozen request: its body, its path parameters, query and headers,
to a CRM-like API in a process of its own that takes only its own field names."""

import pytest

from outbox.destinations.registry import destination_from_config
from outbox.failures import Outgoing
from outbox.models import FailureClass
from outbox.payloads import payload_hash
from tests.outbox.destinations.mapped_request_server import mapped_request_server_start

KEY = "onboarding:7:42:1:create_client"


@pytest.fixture
def crm():
    server = mapped_request_server_start()
    yield server
    server.stop()


@pytest.fixture
def crm_destination(crm, monkeypatch):
    monkeypatch.setenv("HANDOFF_DEST_CRM_TOKEN", "crm-token")
    destination = destination_from_config(
        {
            "kind": "idempotency_key_http",
            "name": "crm",
            "url": crm.url,
            "create": {"method": "POST", "path": "/services/data/sobjects/{object}/"},
            "auth": {"scheme": "bearer", "token_env": "HANDOFF_DEST_CRM_TOKEN"},
            "receipt": {"id": "id", "payload": "record"},
            "retry": {"base_delay": 0, "max_delay": 0},
        }
    )
    yield destination
    destination.close()


def sent(body: dict, **request) -> Outgoing:
    return Outgoing(
        action_key=KEY,
        payload=body,
        payload_hash=payload_hash(body),
        request={"body": body, "path": {}, "query": {}, "headers": {}, **request},
    )


def test_the_frozen_request_is_what_the_destination_receives(crm, crm_destination):
    body = {"Name": "Acme", "Industry": "Retail", "Plan__c": "standard"}

    result = crm_destination.deliver(
        sent(
            body,
            path={"object": "Account"},
            query={"source": "handoff console"},
            headers={"X-Plan": "standard"},
        )
    )

    assert result.delivered, result
    [write] = crm.writes()
    assert write["path"] == "/services/data/sobjects/Account/?source=handoff+console"
    assert write["body"] == body
    assert write["headers"]["x-plan"] == "standard"
    assert write["headers"]["idempotency-key"] == KEY
    assert write["headers"]["authorization"] == "Bearer crm-token"
    assert len(crm.state()["records"]) == 1


def test_a_mapped_header_cannot_take_the_place_of_the_credentials(crm, crm_destination):
    result = crm_destination.deliver(
        sent({"Name": "Acme"}, path={"object": "Account"}, headers={"Authorization": "Bearer x"})
    )

    assert result.delivered, result
    [write] = crm.writes()
    assert write["headers"]["authorization"] == "Bearer crm-token"


def test_a_header_outside_http_grammar_is_refused_and_nothing_is_sent(crm, crm_destination):
    result = crm_destination.deliver(
        sent({"Name": "Acme"}, path={"object": "Account"}, headers={"X-Plan": "a\r\nX-Evil: 1"})
    )

    assert not result.delivered
    assert result.failure_class == FailureClass.PERMANENT
    assert result.reason_code == "request_refused"
    assert 'request.headers["X-Plan"]' in result.detail or "request.headers.X-Plan" in result.detail
    assert crm.writes() == []
