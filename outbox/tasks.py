"""django-q2 tasks. Thin, and safe to run twice: the outbox rows are the truth, not the messages."""

from django.conf import settings

from outbox import services
from outbox.dispatch import dispatcher
from outbox.services import retention
from outbox.services.work_pull import handoffs_pull_work_status


def dispatch_due() -> dict:
    """Deliver what is due; first expire the leases that ran out (one statement), so that with only the
    cluster running, a row stranded by a lost worker is noticed at the next wake-up, not at the next
    once-a-minute sweep."""
    expired = services.handoff_expire_leases(actor_label="dispatch_due")
    stats = dispatcher.drain()
    return {"expired_leases": expired, "claimed": stats.claimed, "delivered": stats.delivered}


def sweep() -> dict:
    stats = dispatcher.sweep()
    services.bulk_jobs_resume()
    return {
        "expired_leases": stats.expired_leases,
        "settled": stats.settled,
        "claimed": stats.claimed,
        "delivered": stats.delivered,
    }


def work_status_pull() -> dict:
    """The work status of destinations that are asked for it (`work_status` pulled), due reads only."""
    run = handoffs_pull_work_status()
    return {
        "read": run.read,
        "recorded": run.recorded,
        "unknown": run.unknown,
        "failed": run.failed,
    }


def bulk_job_run(job_id: int) -> dict:
    job = services.bulk_job_run(job_id=job_id)
    return {"job": job.pk, "done": job.done, "position": job.position, "total": job.total}


def archive_settled() -> dict:
    """Retention's scheduled run: a bounded number of short batches (the rest goes at the next run), none
    begun after half the cluster's task timeout (with its pauses a run of 50 batches can last longer), then
    the destination holds that stopped holding before the retention age (`destination_holds_prune`)."""
    run = retention.handoffs_archive_settled(
        max_batches=settings.HANDOFF_RETENTION_MAX_BATCHES_PER_RUN,
        max_seconds=settings.Q_CLUSTER["timeout"] / 2,
    )
    return {
        "archived": run.archived,
        "held": run.held,
        "batches": run.batches,
        "holds_pruned": run.holds_pruned,
    }
