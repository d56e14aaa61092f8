"""The header's "need attention" count follows what the operator does on a handoff's page: after a repair
(an htmx answer, no reload) it says the new number, not the one the page was loaded with."""

import pytest
from playwright.sync_api import expect

from tests.browser.test_journeys import sweep_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_header_count_drops_after_a_repair_without_a_reload(page, live_server, sign_in):
    _world, handoffs = sweep_world()
    delivered_with_finding = handoffs[3]
    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/{delivered_with_finding.pk}/")
    count = page.locator('aside.workspaces [data-workspace="7"] a.count', has_text="need attention")
    # Uncertain, rejected, and delivered with an open finding.
    expect(count).to_have_text("3 need attention")
    loaded = page.evaluate("() => performance.getEntriesByType('navigation').length")

    # The repair is the recommended step of a finding: its form is open.
    expect(page.locator("#repair")).to_have_attribute("open", "")
    page.get_by_label("What was done outside the system (required)").fill(
        "asked the receiving team to restore the approved plan"
    )
    page.get_by_role("button", name="Record the repair").click()
    expect(page.locator("#handoff-panel .result")).to_be_visible()
    expect(count).to_have_text("2 need attention")
    assert page.evaluate("() => performance.getEntriesByType('navigation').length") == loaded
