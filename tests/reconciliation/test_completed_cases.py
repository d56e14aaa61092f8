"""Health and /metrics count completed cases beside delivered steps and failed work (issue 37 item 5): a case
is a request whose every step's work is done. Before, "Completed" and `handoff_completed` counted delivered
steps, those whose work the receiver reports failed too, and nothing counted cases."""

import pytest
from django.urls import reverse

from outbox.models import Handoff, HandoffState
from outbox.services import handoffs_record_work_status
from reconciliation.selectors.health import health_summary
from tests.builders import approve, deliver
from tests.factories import three_step_onboarding_world
from tests.reconciliation.test_metrics import labels, scrape

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def walk(world, number: int, *, steps: int) -> list[Handoff]:
    """Request `number` approved and its first `steps` steps delivered through the in-process receiver."""
    step = approve(world, number)
    delivered = []
    for _ in range(steps):
        delivered.append(deliver(step))
        step = Handoff.objects.filter(instance_key=step.instance_key, state=S.PENDING).first()
    return delivered


@pytest.fixture
def cases():
    """Three requests of three steps: 42 every step's work done; 43 all delivered, step 2's work failed;
    44 two steps delivered and done, its third not sent yet."""
    world = three_step_onboarding_world()
    done = walk(world, 42, steps=3)
    failed = walk(world, 43, steps=3)
    short = walk(world, 44, steps=2)
    finished = [h.action_key for h in (*done, failed[0], failed[2], *short)]
    handoffs_record_work_status(statuses=dict.fromkeys(finished, "done"))
    handoffs_record_work_status(statuses={failed[1].action_key: "failed"})
    return world


def test_health_counts_completed_cases_beside_delivered_steps_and_failed_work(cases, client):
    assert Handoff.objects.filter(state=S.DELIVERED).count() == 8
    figures = health_summary([7])["figures"]
    assert figures["completed"]["value"] == 8
    assert figures["work_failed"]["value"] == 1
    assert figures["cases_completed"]["value"] == 1
    client.force_login(cases["olga"])
    page = client.get(reverse("reconciliation:health")).content.decode()
    assert "steps delivered" in page
    assert 'id="fig-cases-completed"' in page and 'id="fig-work-failed"' in page


def test_metrics_count_completed_cases_and_failed_work(cases, client):
    samples = scrape(client)
    w7 = labels(workflow="onboarding", workspace="7")
    assert samples[("handoff_completed_total", w7)] == 8
    assert samples[("handoff_work_failed", w7)] == 1
    assert samples[("handoff_cases_completed", w7)] == 1
