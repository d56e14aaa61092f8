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


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_runs_time_starts_at_the_first_transactions_commit_not_at_its_first_insert():
    """The rate is counted from when a dispatcher can first see a handoff of the run: after the first
    transaction committed, before the second began, on the database's clock."""
    rows = outside_check.handoff_rows(51, 4)
    connection.ensure_connection()

    first_visible = outside_check.insert_handoffs(connection.connection, rows, chunk=2)

    created = dict(
        Handoff.objects.filter(source_id__in=[51, 53]).values_list("source_id", "created_at")
    )
    assert created[51] < first_visible < created[53]
