"""Olga's (operator) screens through bob's three-step request with a fault at each step (issue 37): step 1's
answer dropped after the receiver created its task, step 2's call timed out before it did, step 3's receipt
malformed, each settled by asking the receiver. At every moment, at 1280 and 390 px, the handoff list, each
step's handoff page and Health read true: every claim they carry (`data-claim`) is checked by the truth
oracle (tests/oracle) against both databases and the receiver's records, and axe finds nothing serious."""

import pytest
from django.urls import reverse

from outbox.models import DestinationHealth, Handoff
from tests.browser.three_step_faults import WIDTHS, walk_three_faults
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true, claims_in
from tests.oracle.truth import Truth

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_olgas_handoff_pages_and_health_read_true_through_a_fault_at_each_step(
    page, live_server, sign_in, axe_check, no_horizontal_scroll
):
    world = three_step_onboarding_world()
    DestinationHealth.objects.get_or_create(name="receiver")
    request = world["request"]
    sign_in("olga")
    seen: set[str] = set()

    def screens() -> list[str]:
        steps = Handoff.objects.filter(source_id=request.pk).order_by("step_index", "pk")
        return [
            reverse("outbox:list"),
            *(reverse("outbox:detail", args=[pk]) for pk in steps.values_list("pk", flat=True)),
            reverse("reconciliation:health"),
        ]

    def reads_true(moment: str) -> None:
        for size in WIDTHS:
            page.set_viewport_size(size)
            pages, truth = {}, Truth()
            for url in screens():
                page.goto(live_server.url + url)
                pages[f"olga {url} at {size['width']} px"] = page.content()
                axe_check(f"{moment}, {url} at {size['width']} px")
                no_horizontal_scroll(f"{moment}, {url} at {size['width']} px")
            assert assert_pages_true(pages, truth, context=f" ({moment})") > 0
            seen.update(c.name for u, h in pages.items() for c in claims_in(u, h))

    walk_three_faults(world, reads_true)
    # The operator's screens stated the handoff's facts and Health's figures, each checked above.
    for name in (
        "handoff.state",
        "handoff.next_owner",
        "handoff.recommended",
        "handoff.outcome_evidence",
        "handoff.attempts_made",
        "attempt.outcome",
        "health.pending",
        "health.needing_person",
    ):
        assert name in seen, name
