"""The handoff page reads its attempts once, for the timeline and for the last successful step alike (issue
40), and says the same step as the read of the last answered attempt."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from outbox.models import Attempt, AttemptOutcome, Handoff
from outbox.selectors import last_successful_step
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_handoff_page_reads_its_attempts_once_and_names_the_last_answered_one(world, rejected):
    answered = Attempt.objects.get(handoff=rejected)
    assert answered.status_code is not None
    # Later attempts that no receiver answered: the step stays the answered one.
    Attempt.objects.bulk_create(
        Attempt(
            handoff=rejected,
            number=answered.number + n,
            fencing_epoch=answered.fencing_epoch + n,
            worker="test:1",
            started_at=timezone.now(),
            outcome=outcome,
            status_code=status,
        )
        for n, (outcome, status) in enumerate(
            ((AttemptOutcome.SKIPPED, 200), (AttemptOutcome.IN_PROGRESS, None)), start=1
        )
    )
    expected = last_successful_step(rejected)  # its own read of the last answered attempt
    assert f"attempt {answered.number} reached the receiver" in expected

    with CaptureQueriesContext(connection) as captured:
        response = client_for(world["olga"]).get(f"/handoffs/{rejected.pk}/")
    assert response.status_code == 200

    assert expected in response.content.decode()
    reads = [q["sql"] for q in captured.captured_queries if 'FROM "outbox_attempt"' in q["sql"]]
    assert len(reads) == 1, reads


def test_handoff_page_reads_who_acknowledged_it_with_the_handoff_and_names_them(world, rejected):
    """Who acknowledged the handoff is read with it (issue 40: a user read of its own while rendering)."""
    oscar = world["oscar"]
    Handoff.objects.filter(pk=rejected.pk).update(
        acknowledged_by=oscar, acknowledged_at=timezone.now()
    )

    with CaptureQueriesContext(connection) as captured:
        response = client_for(world["olga"]).get(f"/handoffs/{rejected.pk}/")
    assert response.status_code == 200

    assert f"acknowledged by {oscar.get_username()} at" in response.content.decode()
    by_id = re.compile(rf'^SELECT "auth_user".* WHERE "auth_user"\."id" = {oscar.pk}\b')
    users_read_alone = [q["sql"] for q in captured.captured_queries if by_id.search(q["sql"])]
    assert users_read_alone == [], users_read_alone
