"""A key is recorded once for ever: after retention archived its handoff, recording the same action key again is
the duplicate it is while the handoff is still in the outbox (ActionKeyExists, nothing written, the approval
rolled back with it), so an archived key never gets a second handoff nor a second effect (both backends)."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import F

from approvals.models import Approval, Request, RequestState
from approvals.services import request_approve
from outbox.errors import ActionKeyExists
from outbox.models import ArchivedHandoff, Handoff, HandoffEvent
from outbox.services import retention
from outbox.services.retention import handoffs_archive_settled
from tests.builders import deliver, record
from tests.factories import onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

KEY = "onboarding:7:42:1"


def archive(handoff: Handoff) -> None:
    """Retention as it runs: the delivered handoff, older than the retention age, moves to the archive."""
    Handoff.objects.filter(pk=handoff.pk).update(updated_at=F("updated_at") - timedelta(days=400))
    handoffs_archive_settled(older_than_days=30)
    assert not Handoff.objects.filter(pk=handoff.pk).exists()
    assert ArchivedHandoff.objects.filter(action_key=handoff.action_key).exists()


def kept(handoff: Handoff) -> None:
    """The first handoff stays in the outbox (the hot-table duplicate)."""


@pytest.mark.parametrize("where", [kept, archive], ids=["in the outbox", "archived"])
def test_recording_a_recorded_key_again_is_a_duplicate_wherever_its_handoff_is(where):
    first = deliver(record(1))
    where(first)
    handoffs, events = Handoff.objects.count(), HandoffEvent.objects.count()

    with pytest.raises(ActionKeyExists):
        record(1)

    assert Handoff.objects.count() == handoffs
    assert HandoffEvent.objects.count() == events
    assert Handoff.objects.filter(action_key=first.action_key, state="pending").count() == 0


def test_a_key_never_recorded_is_recorded_beside_archived_ones():
    archive(deliver(record(1)))
    assert record(2).state == "pending"


def _archive_key_42() -> dict:
    world = onboarding_world()
    handoff = request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    deliver(handoff)
    archive(handoff)
    # The source forgets the approval (a restore, a manual edit): the request waits for a decision again.
    Approval.objects.all().delete()
    Request.objects.filter(pk=world["request"].pk).update(state=RequestState.AWAITING_APPROVAL)
    return world


def test_approving_a_request_whose_key_was_archived_rolls_back_like_a_hot_duplicate():
    world = _archive_key_42()
    with pytest.raises(ActionKeyExists):
        request_approve(
            workspace_id=7,
            number=42,
            revision=1,
            actor=world["alice"],
            payload_hash=world["request"].payload_hash,
        )
    assert Request.objects.get(pk=world["request"].pk).state == RequestState.AWAITING_APPROVAL
    assert Approval.objects.count() == 0
    assert not Handoff.objects.filter(action_key=KEY).exists()
    assert ArchivedHandoff.objects.filter(action_key=KEY).count() == 1


def _in_thread(work, results: dict, name: str) -> threading.Thread:
    def run():
        try:
            results[name] = work()
        except Exception as exc:  # noqa: BLE001 (the outcome the test asserts)
            results[name] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_for(condition, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {seconds:g} s"
        time.sleep(0.05)


def _insert_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE %s",
            ['INSERT INTO "outbox_handoff"%'],
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.postgres
@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_recording_while_retention_moves_the_same_key_is_a_duplicate():
    """The race: a retention batch has written the archive row and deleted the hot one, not committed yet,
    when the key is recorded again. The insert waits for the batch; after its commit the key is archived,
    and recording it is the duplicate (with the archive asked before the insert, it was a second handoff)."""
    first = deliver(record(1))
    Handoff.objects.filter(pk=first.pk).update(updated_at=F("updated_at") - timedelta(days=400))
    moved, release, results = threading.Event(), threading.Event(), {}

    def retention_batch():
        with transaction.atomic():
            rows = retention._pick(older_than_days=30, size=10, after=None, lock=True)
            retention._move(rows)
            moved.set()
            assert release.wait(120)
        return [row["id"] for row in rows]

    batch = _in_thread(retention_batch, results, "batch")
    _wait_for(moved.is_set, "retention batch holding the moved rows")
    recorder = _in_thread(lambda: record(1), results, "record")
    _wait_for(_insert_waits_on_a_lock, "insert waiting for the retention batch")
    release.set()
    batch.join(120)
    recorder.join(120)

    assert results["batch"] == [first.pk]
    assert isinstance(results["record"], ActionKeyExists), results["record"]
    assert not Handoff.objects.filter(action_key=first.action_key).exists()
    assert ArchivedHandoff.objects.filter(action_key=first.action_key).count() == 1
