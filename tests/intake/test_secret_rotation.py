"""During a rotation the intake accepts triggers signed with the new or the previous secret, and no other."""

import base64
import json

import pytest

from approvals.models import TriggerRecord
from tests.factories import ONBOARDING_PAYLOAD

pytestmark = pytest.mark.django_db


def trigger_document(reference: str = "crm-1") -> dict:
    return {
        "workflow": "onboarding",
        "workspace_id": 7,
        "reference": reference,
        "revision": 1,
        "payload": ONBOARDING_PAYLOAD,
    }


def secret(seed: bytes) -> str:
    return "whsec_" + base64.b64encode(seed.ljust(32, b"!")).decode()


NEW, PREVIOUS, UNKNOWN = (
    secret(b"intake-new"),
    secret(b"intake-previous"),
    secret(b"intake-unknown"),
)


@pytest.fixture
def rotating(settings):
    settings.INTAKE_SIGNING_SECRET = NEW
    settings.INTAKE_SIGNING_SECRET_PREVIOUS = PREVIOUS


def test_new_and_previous_secret_both_verify_during_a_rotation(world, rotating, send):
    assert send(trigger_document(reference="crm-new"), secret=NEW).status_code == 202
    assert send(trigger_document(reference="crm-old"), secret=PREVIOUS).status_code == 202
    assert set(TriggerRecord.objects.values_list("reference", flat=True)) == {"crm-new", "crm-old"}


def test_a_third_secret_is_refused_during_a_rotation(world, rotating, post_signed):
    response = post_signed(body=json.dumps(trigger_document()), secret=UNKNOWN)
    assert response.status_code == 401
    assert response.json()["error"] == "signature_rejected"
    assert TriggerRecord.objects.count() == 0


def test_previous_secret_is_refused_once_the_rotation_ends(world, settings, send):
    settings.INTAKE_SIGNING_SECRET = NEW
    settings.INTAKE_SIGNING_SECRET_PREVIOUS = ""
    assert send(trigger_document(reference="crm-old"), secret=PREVIOUS).status_code == 401
    assert send(trigger_document(reference="crm-new"), secret=NEW).status_code == 202
