"""Reconciliation accounts for archived handoffs: a key the receiver lists that retention archived at the
source is the source's (not an orphan), its approval has its handoff, and a delivered archived key the
receiver lost is still missing at the receiver."""

from datetime import timedelta

import pytest
from django.db.models import F

from delivery.models import ReceiverTask
from outbox.models import ArchivedHandoff, Handoff
from outbox.services.retention import handoffs_archive_settled
from reconciliation.models import Finding, FindingKind, RunStatus
from reconciliation.services.runs import reconciliation_run
from tests.builders import approve, deliver, record

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def archive_all() -> None:
    Handoff.objects.update(updated_at=F("updated_at") - timedelta(days=40))
    handoffs_archive_settled()


def test_archived_keys_are_counted_and_neither_orphans_nor_unhanded_approvals(world):
    approved = deliver(approve(world))  # request 42: its approval's handoff goes to the archive
    deliver(record(43))
    archive_all()
    live = deliver(record(44))
    assert set(ArchivedHandoff.objects.values_list("action_key", flat=True)) == {
        approved.action_key,
        "onboarding:7:43:1",
    }

    run = reconciliation_run(batch_size=2)

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.findings_by_kind == {}
    assert not Finding.objects.exists()
    assert (run.source_keys, run.receiver_keys, run.keys_compared) == (3, 3, 3)
    assert run.approved_requests_checked == 1
    assert Handoff.objects.get().pk == live.pk


def test_an_archived_delivered_key_the_receiver_lost_is_missing_at_the_receiver(world):
    handoff = deliver(record(42))
    archive_all()
    ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).delete()

    run = reconciliation_run()

    assert run.findings_by_kind == {FindingKind.MISSING_AT_RECEIVER: 1}
    finding = Finding.objects.get()
    assert (finding.action_key, finding.handoff_id) == (handoff.action_key, handoff.pk)
    assert finding.source_evidence["state"] == "delivered"
