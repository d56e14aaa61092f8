"""/metrics' counters never go down when retention moves their rows out of the hot tables: what a moved batch
counted (delivered handoffs, duplicate preventions, failed attempts, operator actions) is carried into
`ArchivedTotal` in the batch's transaction, and each counter is the hot rows' count plus that. A drop would read
to Prometheus as a counter reset, and `rate()` over it as a burst."""

from datetime import timedelta

import pytest
from django.db.models import F

from delivery.services import task_create_idempotent
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.failures import DeliveryResult
from outbox.models import ArchivedHandoff, Attempt, FailureClass, Handoff
from outbox.services import handoff_retry
from outbox.services.retention import handoffs_archive_settled
from reconciliation.models import ArchivedTotal
from tests.builders import deliver, record
from tests.factories import ONBOARDING_PAYLOAD
from tests.outbox.scripted_destination import ScriptedDestination
from tests.reconciliation.test_metrics import labels, scrape

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
W7 = {"workflow": "onboarding", "workspace": "7"}
COUNTERS = [
    ("handoff_completed_total", labels(**W7)),
    ("handoff_duplicate_effect_preventions_total", labels(**W7)),
    ("handoff_failed_attempts_total", labels(**W7, failure_class="transient")),
    ("handoff_manual_interventions_total", labels(**W7)),
]


def _settled_history(world) -> None:
    deliver(record(1))
    # The receiver already had key 2's task: the attempt is a duplicate prevented.
    task_create_idempotent(action_key="onboarding:7:2:1", payload=dict(ONBOARDING_PAYLOAD))
    deliver(record(2))
    # Key 3 fails once (a failed attempt), an operator runs it again (an operator action), then it arrives.
    third = record(3)
    failed = DeliveryResult.failed(FailureClass.TRANSIENT, "http_503", "scripted")
    assert (
        handoff_deliver(handoff_id=third.pk, destination=ScriptedDestination(failed)) == "pending"
    )
    handoff_retry(handoff_id=third.pk, actor=world["olga"])
    deliver(Handoff.objects.get(pk=third.pk))


def _archive_everything() -> None:
    Handoff.objects.update(updated_at=F("updated_at") - timedelta(days=400))
    assert handoffs_archive_settled(older_than_days=30).archived == 3
    assert not Handoff.objects.exists() and not Attempt.objects.exists()
    assert ArchivedHandoff.objects.count() == 3


def test_counters_keep_their_values_when_retention_moves_their_rows(client, world):
    _settled_history(world)
    before = scrape(client)
    assert [before[c] for c in COUNTERS] == [3, 1, 1, 1], [before.get(c) for c in COUNTERS]

    _archive_everything()

    after = scrape(client)
    assert [after.get(c) for c in COUNTERS] == [3, 1, 1, 1], "a counter went down"
    # The gauges are states now: the moved handoffs are no longer in the hot table.
    assert after.get(("handoff_handoffs", labels(**W7, state="delivered")), 0) == 0

    # New rows add to the carried totals.
    deliver(record(4))
    assert scrape(client)[COUNTERS[0]] == 4


def test_a_batch_that_rolls_back_carries_nothing_over(world, monkeypatch):
    """The carry-over is in the batch's transaction: a batch that fails after it (here, the delete) leaves
    the rows in the hot tables and the archived totals as they were, so nothing is counted twice."""
    _settled_history(world)
    Handoff.objects.update(updated_at=F("updated_at") - timedelta(days=400))
    from outbox.services import retention

    def fail(*args, **kwargs):
        raise RuntimeError("the delete failed")

    monkeypatch.setattr(retention, "_delete_where_in", fail)
    with pytest.raises(RuntimeError):
        handoffs_archive_settled(older_than_days=30)
    assert Handoff.objects.count() == 3 and not ArchivedTotal.objects.exists()
