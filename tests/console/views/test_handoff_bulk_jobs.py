"""A bulk action over more matches than one web request should handle runs as a background job: the
operator confirms, sees its progress, and every handoff is changed by its own service. Both backends."""

import re

import pytest

from outbox import tasks
from outbox.models import BulkJob, BulkJobState, Handoff, HandoffEvent, HandoffState
from tests.console.clients import HTMX, client_for
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def bulk(user, data):
    return client_for(user).post("/handoffs/bulk", data, **HTMX)


@pytest.mark.long
def test_acknowledging_5000_matches_runs_as_a_background_job_with_visible_progress(world):
    Handoff.objects.bulk_create(
        HandoffFactory.build_batch(
            5000, state=S.NEEDS_ATTENTION, failure_class="permanent", reason_code="payload_invalid"
        )
    )
    filters = {"state": "needs_attention"}
    preview = bulk(world["olga"], {**filters, "bulk_action": "acknowledge"})
    assert "<strong>5000</strong> handoffs match" in preview.content.decode()
    assert "That many run in the background" in preview.content.decode()
    upto = re.search(r'name="bulk_upto" value="(\d+)"', preview.content.decode()).group(1)

    started = bulk(
        world["olga"],
        {
            **filters,
            "bulk_action": "acknowledge",
            "bulk_confirm": "5000",
            "bulk_upto": upto,
            "bulk_reason": "seen by the night shift",
        },
    )
    job = BulkJob.objects.get()
    body = started.content.decode()
    assert "5000 handoffs: running in the background" in body
    # The counts sit in the claims they carry (`data-claim`): the words are read without the tags.
    words = re.sub(r"<[^>]+>", "", body)
    assert f'hx-get="/handoffs/bulk/{job.pk}/"' in body and "0 of 5000 processed" in words
    assert HandoffEvent.objects.filter(action="acknowledge").count() == 0, (
        "nothing done in the web request"
    )

    tasks.bulk_job_run(job.pk)

    progress = client_for(world["olga"]).get(f"/handoffs/bulk/{job.pk}/", **HTMX).content.decode()
    assert "done, 5000 of 5000 processed (5000 done)" in re.sub(r"<[^>]+>", "", progress)
    assert "hx-get" not in progress
    assert Handoff.objects.filter(acknowledged_at__isnull=False).count() == 5000
    assert HandoffEvent.objects.filter(action="acknowledge", actor=world["olga"]).count() == 5000
    assert client_for(world["alice"]).get(f"/handoffs/bulk/{job.pk}/").status_code == 404, (
        "only its operator"
    )


def test_an_interrupted_bulk_job_continues_where_it_stopped(world):
    rows = HandoffFactory.create_batch(5, state=S.PENDING)
    from outbox.services import bulk_job_start

    job = bulk_job_start(
        action="cancel", handoff_ids=[h.pk for h in rows], actor=world["olga"], reason="withdrawn"
    )
    BulkJob.objects.filter(pk=job.pk).update(state=BulkJobState.RUNNING, position=2, done=2)
    Handoff.objects.filter(pk__in=[rows[0].pk, rows[1].pk]).update(state=S.CANCELLED)
    tasks.bulk_job_run(job.pk)
    job.refresh_from_db()
    assert (job.state, job.position, job.done) == (BulkJobState.DONE, 5, 5)
    assert set(Handoff.objects.values_list("state", flat=True)) == {S.CANCELLED}
    assert HandoffEvent.objects.filter(action="cancel").count() == 3, (
        "the first two were not done twice"
    )


def test_bulk_cancel_needs_a_reason(world):
    HandoffFactory.create_batch(2, state=S.PENDING)
    refused = bulk(
        world["olga"],
        {
            "state": "pending",
            "bulk_action": "cancel",
            "bulk_confirm": "2",
            "bulk_upto": "999999999",
            "bulk_reason": "",
        },
    )
    assert b"a reason is required to cancel" in refused.content
    assert not Handoff.objects.filter(state=S.CANCELLED).exists()


def test_the_sweep_resumes_a_bulk_job_whose_wake_up_was_lost(world):
    from datetime import timedelta

    from django.utils import timezone

    from outbox.services import bulk_job_start

    rows = HandoffFactory.create_batch(3, state=S.NEEDS_ATTENTION)
    job = bulk_job_start(
        action="acknowledge", handoff_ids=[h.pk for h in rows], actor=world["olga"]
    )
    tasks.sweep()
    assert BulkJob.objects.get(pk=job.pk).state == BulkJobState.QUEUED, (
        "a fresh job is left to its own wake-up"
    )
    BulkJob.objects.filter(pk=job.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    tasks.sweep()
    assert BulkJob.objects.get(pk=job.pk).state == BulkJobState.DONE
    assert Handoff.objects.filter(acknowledged_at__isnull=False).count() == 3


def test_a_bulk_acknowledge_job_writes_a_chunk_in_a_few_statements_not_a_few_per_handoff(
    world, django_assert_max_num_queries
):
    from outbox.services import bulk_job_start

    Handoff.objects.bulk_create(
        HandoffFactory.build_batch(
            250, state=S.NEEDS_ATTENTION, failure_class="permanent", reason_code="payload_invalid"
        )
    )
    HandoffFactory.create_batch(2, state=S.PENDING)
    ids = list(Handoff.objects.order_by("pk").values_list("pk", flat=True))
    job = bulk_job_start(action="acknowledge", handoff_ids=ids, actor=world["olga"])

    # Three chunks of 100: a handful of statements each (lock, update, events, progress); the per-handoff
    # service took five or six per handoff, over 1,500 here.
    with django_assert_max_num_queries(40):
        tasks.bulk_job_run(job.pk)

    job.refresh_from_db()
    assert (job.state, job.position, job.done) == (BulkJobState.DONE, 252, 250)
    assert job.skipped == {"cannot move from pending to acknowledged": 2}
    acknowledged = Handoff.objects.filter(
        acknowledged_by=world["olga"], acknowledged_at__isnull=False
    )
    assert acknowledged.count() == 250
    assert not Handoff.objects.filter(state=S.PENDING, acknowledged_at__isnull=False).exists()
    events = HandoffEvent.objects.filter(action="acknowledge", actor=world["olga"])
    assert events.count() == 250 and not events.filter(at__isnull=True).exists()
    assert set(events.values_list("from_state", "to_state", "reason", "actor_label")) == {
        (S.NEEDS_ATTENTION, S.NEEDS_ATTENTION, "bulk acknowledge", world["olga"].get_username())
    }
