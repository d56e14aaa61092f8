"""A request some of whose steps retention archived (issue 37): the request's line and its steps' lines name
the archived steps as settled and archived, never as "not started" with the system owning the next step,
and the oracle finds every claim on every screen true. Both backends."""

import datetime

import pytest
from django.db.models import F

from delivery.services import task_status_set
from outbox.dispatch.dispatcher import drain
from outbox.models import ArchivedHandoff, Handoff
from outbox.services.retention import handoffs_archive_settled
from reconciliation.services import reconciliation_run
from tests.builders import approve
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true, claims_in
from tests.oracle.screens import render_every_screen
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
INSTANCE = "onboarding:7:42:1"


def test_a_request_whose_last_step_was_archived_reads_done_and_true_on_every_screen():
    world = three_step_onboarding_world()
    approve(world)
    drain()
    steps = list(Handoff.objects.filter(instance_key=INSTANCE).order_by("step_index"))
    assert [s.state for s in steps] == ["delivered"] * 3
    for step in steps:
        task_status_set(action_key=step.action_key, status="done")
    reconciliation_run()
    # The last step settled first: retention's first batch of one takes it, and leaves the other two.
    last = steps[-1]
    Handoff.objects.filter(pk=last.pk).update(
        updated_at=F("updated_at") - datetime.timedelta(hours=1)
    )
    handoffs_archive_settled(older_than_days=0, batch_size=1, max_batches=1)
    assert ArchivedHandoff.objects.filter(action_key=last.action_key).exists()
    assert Handoff.objects.filter(instance_key=INSTANCE).count() == 2

    pages = render_every_screen({"requester": world["bob"], "operator": world["olga"]})
    assert_pages_true(pages, Truth())
    said = {
        (c.name, c.subject, c.value, c.words)
        for url, html in pages.items()
        if url.startswith("requester /approvals/7/42/1/")
        for c in claims_in(url, html)
    }
    request_pk = world["w7"].requests.get(number=42, revision=1).pk
    owners = {
        v for n, s, v, _ in said if n == "request.next_owner" and s == f"request:{request_pk}"
    }
    assert owners == {"none"}
    page = pages[next(u for u in pages if u.startswith("requester /approvals/7/42/1/"))]
    assert "the system sends it after the step before" not in page
    assert "archived" in page
