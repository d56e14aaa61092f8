"""On a phone the handoff list's filters are folded, so that the first screen shows handoffs; one tap opens
them, and a filter that is set keeps them open. On a desktop they are open."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_journeys import sweep_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_filters_fold_on_a_phone_and_open_on_a_tap(page, live_server, sign_in):
    _world, handoffs = sweep_world()
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/")
    state = page.get_by_label("State")
    expect(state).to_be_hidden()
    expect(page.locator("table.handoffs tbody tr").first).to_be_in_viewport()

    page.get_by_text("Filters", exact=True).click()
    expect(state).to_be_visible()
    state.select_option("uncertain")
    expect(page.locator(f"#handoff-{handoffs[1].pk}")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=uncertain$"))

    # A filter in the address keeps the panel open after a reload.
    page.reload()
    expect(page.get_by_label("State")).to_have_value("uncertain")
    expect(page.get_by_label("State")).to_be_visible()


def test_filters_are_open_on_a_desktop(page, live_server, sign_in):
    sweep_world()
    page.set_viewport_size({"width": 1280, "height": 800})
    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/")
    expect(page.get_by_label("State")).to_be_visible()
