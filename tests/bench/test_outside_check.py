"""bench/outside_check.py inserts handoffs as another system would, with plain SQL: the rows it writes must be
what the product's own recording writes as far as a dispatcher is concerned, due at once and claimed with the
payload and the hash the receiver compares (outbox/payloads.py), else the check would measure nothing."""

import pytest
from django.db import connection

from bench import outside_check
from outbox.dispatch.claims import handoff_claim_due
from outbox.models import Handoff, HandoffState
from outbox.payloads import payload_hash

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default", "delivery"])]


def test_handoffs_inserted_by_plain_sql_are_claimed_with_the_products_payload_hash():
    rows = outside_check.handoff_rows(41, 3)
    with connection.cursor() as cursor:
        cursor.executemany(outside_check.INSERT_SQL, rows)

    claims = handoff_claim_due(
        worker="outside-test", limit=10, destination_name=outside_check.DESTINATION
    )

    assert sorted(claim.action_key for claim in claims) == [
        "onboarding:7:41:1",
        "onboarding:7:42:1",
        "onboarding:7:43:1",
    ]
    for claim in claims:
        assert claim.payload_hash == payload_hash(claim.payload)
        assert claim.payload["plan"] == "standard"
    assert set(Handoff.objects.values_list("state", flat=True)) == {HandoffState.IN_FLIGHT}
