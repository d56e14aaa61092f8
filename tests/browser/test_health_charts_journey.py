"""The health page's 24-hour charts are read at a glance: coloured bars (they were black: the colour rule
never matched), an hour track so that a lone bar still shows where in the day it stands, the first and last
hours under the chart, and the numbers per hour for whoever cannot see the picture."""

import pytest
from playwright.sync_api import expect

from approvals.services import request_approve
from outbox.dispatch.dispatcher import drain
from tests.factories import onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_24_hour_charts_are_coloured_with_their_hours(
    page, live_server, sign_in, axe_check, no_horizontal_scroll, width
):
    world = onboarding_world()
    request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    assert drain().delivered == 1
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("olga")
    page.goto(f"{live_server.url}/health/")
    chart = page.locator("#chart-delivered")
    bars = chart.locator("rect.bar")
    expect(bars).to_have_count(1)
    fill = bars.first.evaluate("(e) => getComputedStyle(e).fill")
    assert fill == "rgb(60, 157, 93)", f"the delivery bar is drawn in {fill}"
    expect(chart.locator("rect.track")).to_have_count(24)
    expect(chart.locator(".chart-axis span")).to_have_count(2)
    chart.get_by_text("Per hour").click()
    expect(chart.locator(".chart-hours")).to_contain_text("UTC: 1")
    expect(page.locator("#chart-failed .chart-hours")).to_contain_text("none in the last 24 hours")
    no_horizontal_scroll(f"health at {width} px")
    axe_check(f"health at {width} px")
