"""Triggers racing each other: the same webhook id twice at once, and two revisions of one request at once.

On PostgreSQL the calls really run at once, in threads. SQLite runs one write transaction at a time
(`transaction_mode=IMMEDIATE`), so there the calls run one after the other, which is what the
database does with them anyway (the in-memory test database cannot share a write lock across threads).
"""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from approvals.intake import SignedMessage, trigger_receive
from approvals.models import Request, RequestState, TriggerOutcome, TriggerRecord
from tests.factories import ONBOARDING_PAYLOAD, onboarding_world
from tests.intake.triggers import trigger_document

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)


def race(*calls):
    if connections["default"].vendor != "postgresql":
        return [call() for call in calls]
    barrier = threading.Barrier(len(calls))
    results, errors = [None] * len(calls), []

    def run(i, call):
        try:
            barrier.wait(timeout=10)
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return results


def test_same_trigger_at_once_makes_one_request():
    onboarding_world()
    now = datetime.now(tz=UTC).replace(microsecond=0)
    document = trigger_document()
    answers = race(
        *[
            (
                lambda n=n: trigger_receive(
                    message=SignedMessage("evt_race", now - timedelta(seconds=n)), document=document
                )
            )
            for n in range(3)
        ]
    )
    assert sorted(a.status_code for a in answers) == [200, 200, 202]
    assert Request.objects.filter(number=43).count() == 1
    assert TriggerRecord.objects.filter(outcome=TriggerOutcome.ACCEPTED).count() == 1
    assert TriggerRecord.objects.filter(outcome=TriggerOutcome.DUPLICATE).count() == 2


def test_two_revisions_at_once_leave_one_awaiting_approval():
    onboarding_world()
    now = datetime.now(tz=UTC)
    trigger_receive(message=SignedMessage("evt_r1", now), document=trigger_document(revision=1))
    answers = race(
        *[
            (
                lambda n=n: trigger_receive(
                    message=SignedMessage(f"evt_r{n}", now),
                    document=trigger_document(
                        revision=n, payload={**ONBOARDING_PAYLOAD, "notes": f"rev {n}"}
                    ),
                )
            )
            for n in (2, 3)
        ]
    )
    assert all(a.status_code == 202 for a in answers)
    awaiting = Request.objects.filter(number=43, state=RequestState.AWAITING_APPROVAL)
    assert awaiting.count() == 1
    assert awaiting.get().payload["notes"] == "rev 3", (
        "the newest sender revision wins, whatever the order"
    )
