"""Bob's three-step request, walked in Chromium with a fault at each step (issue 37, done-when): step 1's
answer is dropped after the receiver created its task, step 2's call times out before it did, step 3's receipt
is malformed. At every moment, at 1280 and 390 px, his request page and his list read true: every claim they
carry (`data-claim`) is checked by the truth oracle (tests/oracle) against both databases and the receiver's
records, and axe finds nothing serious."""

import pytest
from django.urls import reverse

from outbox.models import DestinationHealth
from tests.browser.three_step_faults import WIDTHS, walk_three_faults
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true
from tests.oracle.truth import Truth

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_bobs_three_step_request_reads_true_through_a_fault_at_each_step(
    page, live_server, sign_in, axe_check, no_horizontal_scroll
):
    world = three_step_onboarding_world()
    DestinationHealth.objects.get_or_create(name="receiver")
    sign_in("bob")
    screens = [
        live_server.url + reverse("approvals:detail", args=[7, 42, 1]),
        live_server.url + reverse("approvals:mine"),
    ]
    checked = []

    def reads_true(moment: str) -> None:
        for size in WIDTHS:
            page.set_viewport_size(size)
            pages = {}
            truth = Truth()
            for url in screens:
                page.goto(url)
                pages[url] = page.content()
                axe_check(f"{moment}, {url} at {size['width']} px")
                no_horizontal_scroll(f"{moment}, {url} at {size['width']} px")
            checked.append(assert_pages_true(pages, truth, context=f" ({moment})"))

    walk_three_faults(world, reads_true)
    assert all(checked), "every moment's screens carried claims"
