"""Two workers sweep at the same moment: each approver still gets one reminder per revision (the notice's
unique row decides who sends), on a real database with its own connections."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection, connections

from approvals.models import ApprovalNotice, NoticeKind, Request, Role
from approvals.rules import rules_for
from approvals.services.approval_deadlines import approval_deadlines_sweep
from approvals.services.workflow_files import workflows_apply
from outbox.clock import db_time
from tests.approvals.notices import recorded_mail
from tests.factories import make_user, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
WORKERS = 4


def _sweep_at_once() -> list[BaseException]:
    barrier = threading.Barrier(WORKERS)
    errors: list[BaseException] = []

    def worker():
        try:
            barrier.wait(timeout=60)
            approval_deadlines_sweep()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


# SQLite serialises writers: no concurrent insert to race. Selected on PostgreSQL only (never skipped).
@pytest.mark.postgres
def test_concurrent_sweeps_send_each_approver_one_reminder():
    assert connection.vendor == "postgresql", "needs PostgreSQL: run with DATABASE_URL set"
    world = onboarding_world()
    world["rita"] = make_user("rita", workspace=world["w7"], roles=(Role.APPROVER,))
    for name in ("alice", "rita"):
        world[name].email = f"{name}@example.test"
        world[name].save()
    Group.objects.create(name="leads")
    rules = rules_for("onboarding")
    entry = {"name": "onboarding", "schema": rules.schema, "steps": list(rules.steps)}
    entry["approval"] = {
        "due_after_hours": 24,
        "remind_before_hours": 8,
        "expire_after_hours": 72,
        "escalate_to": "leads",
    }
    workflows_apply(document={"workflows": [entry]}, actor=None)
    Request.objects.filter(pk=world["request"].pk).update(
        created_at=db_time() - timedelta(hours=17)
    )
    assert _sweep_at_once() == []
    assert sorted(m.to[0] for m in recorded_mail()) == ["alice@example.test", "rita@example.test"]
    assert ApprovalNotice.objects.filter(kind=NoticeKind.REMINDER).count() == 2
