"""Security events are recorded where they are refused: a forged signature at the receiver's API, a replayed
trigger at intake (its own kind), a sign-in lockout; an accepted call records nothing."""

import json

import pytest

from reconciliation.models import SecurityEvent, SecurityEventKind
from tests.intake.triggers import TRIGGERS_URL, sign, trigger_document

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def post_trigger(client, body: str, headers: dict):
    return client.generic(
        "POST", TRIGGERS_URL, data=body.encode(), content_type="application/json", headers=headers
    )


def test_a_forged_call_at_the_receiver_is_a_security_event_of_the_receiver(client, world):
    response = client.post(
        "/delivery/api/tasks",
        data="{}",
        content_type="application/json",
        headers={"webhook-id": "msg_x", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA"},
    )
    assert response.status_code == 401
    [event] = SecurityEvent.objects.all()
    assert (event.kind, event.source) == (SecurityEventKind.SIGNATURE_REJECTED, "receiver")
    assert event.detail.startswith("/delivery/api/tasks: ")


def test_a_replayed_trigger_is_a_replay_event_and_the_accepted_one_records_nothing(client, world):
    body = json.dumps(trigger_document(reference="crm-555"))
    headers = sign(body, msg_id="msg_replayed")
    assert post_trigger(client, body, headers).status_code in (200, 201, 202)
    assert not SecurityEvent.objects.exists()
    assert post_trigger(client, body, headers).status_code == 401
    [event] = SecurityEvent.objects.all()
    assert (event.kind, event.source) == (SecurityEventKind.REPLAY, "intake")
