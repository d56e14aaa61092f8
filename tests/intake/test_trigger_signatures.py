"""Forged, stale and replayed signatures are refused with 401, and nothing is written."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from approvals.models import Request, RequestEvent, RequestReference, TriggerRecord
from tests.intake.triggers import sign, trigger_document

pytestmark = pytest.mark.django_db

OTHER_SECRET = "whsec_" + base64.b64encode(b"not-the-intake-secret-32-bytes!!").decode()


def snapshot() -> tuple:
    return (
        TriggerRecord.objects.count(),
        Request.objects.count(),
        RequestEvent.objects.count(),
        RequestReference.objects.count(),
    )


def assert_refused(response, snapshot_before):
    assert response.status_code == 401
    assert response.json()["error"] == "signature_rejected"
    assert snapshot() == snapshot_before


def test_forged_signature_is_refused(world, post_signed):
    before = snapshot()
    assert_refused(post_signed(trigger_document(), secret=OTHER_SECRET), before)


def test_signature_of_another_body_is_refused(world, post_signed):
    signed_body = json.dumps(trigger_document(revision=1))
    headers = sign(signed_body)
    before = snapshot()
    assert_refused(
        post_signed(body=json.dumps(trigger_document(revision=9)), headers=headers), before
    )


def test_missing_or_garbled_headers_are_refused(world, post_signed):
    body = json.dumps(trigger_document())
    good = sign(body)
    before = snapshot()
    assert_refused(post_signed(body=body, headers={}), before)
    assert_refused(post_signed(body=body, headers={**good, "webhook-signature": "v1"}), before)
    assert_refused(
        post_signed(body=body, headers={**good, "webhook-timestamp": "yesterday"}), before
    )
    assert_refused(post_signed(body=body, headers={**good, "webhook-id": "evt_other"}), before)


def test_stale_signature_is_refused(world, post_signed):
    before = snapshot()
    old = datetime.now(tz=UTC) - timedelta(minutes=6)
    assert_refused(post_signed(trigger_document(), timestamp=old), before)
    future = datetime.now(tz=UTC) + timedelta(minutes=6)
    assert_refused(post_signed(trigger_document(), timestamp=future), before)


def test_replayed_message_is_refused_and_writes_nothing(world, post_signed):
    body = json.dumps(trigger_document())
    headers = sign(body, msg_id="evt_captured")
    assert post_signed(body=body, headers=headers).status_code == 202
    before = snapshot()
    assert_refused(post_signed(body=body, headers=headers), before)
    assert TriggerRecord.objects.filter(webhook_id="evt_captured").count() == 1


def test_signature_is_checked_before_the_body_is_read_as_json(world, post_signed):
    before = snapshot()
    assert_refused(post_signed(body="{not json", secret=OTHER_SECRET), before)
