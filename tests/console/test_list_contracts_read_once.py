"""A list page reads the replay contract of every destination its rows' actions ask about in one query, not
one query a destination (issue 40), and offers the same actions: a quick "Retry" of an uncertain handoff only
where its destination replays the same key."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from outbox.models import DestinationConfig, HandoffState
from tests.console.clients import client_for
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_a_list_reads_its_destinations_contracts_in_one_query(world):
    DestinationConfig.objects.create(
        name="crm",
        kind="idempotency_key_http",
        config={
            "url": "http://127.0.0.1:9",
            "create": {"method": "POST", "path": "/tasks/"},
            "auth": {"scheme": "bearer", "token_env": "HANDOFF_DEST_CRM_TOKEN"},
            "receipt": {"id": "id", "payload": "record"},
        },
    )
    DestinationConfig.objects.create(
        name="ledger", kind="http", config={"url": "http://127.0.0.1:9"}
    )
    # One uncertain handoff at each destination (the default one without a row: its seed): each asks
    # whether sending again is safe.
    uncertain = {
        name: HandoffFactory(state=HandoffState.UNCERTAIN, attempts=1, destination=name)
        for name in ("receiver", "crm", "ledger")
    }

    with CaptureQueriesContext(connection) as captured:
        response = client_for(world["olga"]).get("/handoffs/")
    assert response.status_code == 200
    page = response.content.decode()

    reads = [
        q["sql"] for q in captured.captured_queries if '"outbox_destinationconfig"' in q["sql"]
    ]
    assert len(reads) == 1, reads
    retry_offered = {
        name for name, h in uncertain.items() if reverse("outbox:retry", args=[h.pk]) in page
    }
    assert retry_offered == {"crm"}, (
        "only the destination that replays the same key gets a quick retry"
    )
