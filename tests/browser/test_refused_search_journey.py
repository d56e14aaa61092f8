"""A search the handoff list cannot read, typed into its box (htmx, no page load): the reason replaces the
results. htmx swapped only 403, 409 and 422 answers, so the 400 with the reason was dropped and the rows of
the previous search stayed on screen under the new question, as if they answered it."""

import pytest
from playwright.sync_api import expect

from tests.browser.test_journeys import sweep_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_a_search_too_long_replaces_the_rows_with_its_reason(page, live_server, sign_in):
    _world, handoffs = sweep_world()
    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/")
    row = page.locator(f"#handoff-{handoffs[0].pk}")
    expect(row).to_be_visible()

    box = page.get_by_label("Search: client, e-mail, searchable field, key or request")
    box.fill("n" * 239)
    box.press("Enter")
    expect(page.locator("#handoff-search-error")).to_have_text(
        "Not searched: a search is at most 200 characters (this one has 239)."
    )
    expect(row).to_have_count(0)
