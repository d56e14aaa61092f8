"""Support staff read destinations in admin and change nothing there (`manage.py destinations apply` does)."""

import pytest
from django.test import Client

from approvals.services import support_staff_enroll
from outbox.models import DestinationConfig
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def test_support_staff_read_a_destination_and_cannot_change_it():
    user = make_user("support")
    support_staff_enroll(user=user)
    support = Client()
    support.force_login(user)
    crm = DestinationConfig.objects.create(
        name="crm", kind="http", config={"url": "http://crm", "secret_env": "CRM_SECRET"}
    )
    listing = support.get("/admin/outbox/destinationconfig/")
    assert listing.status_code == 200 and b"crm" in listing.content
    change = support.get(f"/admin/outbox/destinationconfig/{crm.pk}/change/")
    assert change.status_code == 200 and b'name="_save"' not in change.content
    # The configuration is shown through the one redaction function, as every JSON field in admin.
    assert b"http://crm" in change.content
    assert (
        support.post(
            f"/admin/outbox/destinationconfig/{crm.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
    assert DestinationConfig.objects.filter(pk=crm.pk).exists()
