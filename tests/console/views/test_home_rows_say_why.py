"""Home's "Handoffs that need a person" names why each row is there (issue 24 item 7: delivered rows stood
there as "Delivered / —" with no reason): a delivered handoff whose key has a live finding says
"Reconciliation found: …", a failed one its failure class and reason."""

import re

import pytest

from outbox.models import HandoffState
from tests.console.clients import client_for
from tests.factories import FindingFactory, HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def _row(page: str, pk: int) -> str:
    match = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*?/handoffs/{pk}/.*?</tr>", page, re.S)
    assert match, f"handoff {pk} is listed on Home"
    return match.group(0)


def _last_failure(row: str) -> str:
    match = re.search(r'<td data-label="Last failure">(.*?)</td>', row, re.S)
    assert match, row
    return re.sub(r"<[^>]+>", " ", match.group(1)).strip()


def test_a_delivered_row_with_a_finding_says_what_reconciliation_found(world):
    delivered = HandoffFactory(number=61, state=S.DELIVERED, destination_id="task-61")
    FindingFactory(action_key=delivered.action_key)
    failed = HandoffFactory(
        number=62, state=S.NEEDS_ATTENTION, failure_class="permanent", reason_code="invalid_payload"
    )
    page = client_for(world["olga"]).get("/").content.decode()
    assert (
        _last_failure(_row(page, delivered.pk)) == "Reconciliation found: missing at the receiver"
    )
    assert _last_failure(_row(page, failed.pk)).endswith(": invalid_payload")
    assert "—" not in _last_failure(_row(page, delivered.pk))
