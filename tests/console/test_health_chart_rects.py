"""The health page's hour charts draw their bars in Python (`BarChart.rects`, issue 40: 48 tracks and bars of
seven template variables each were a tenth of the page's CPU), as the template's loop drew them, byte for byte."""

from datetime import UTC, datetime, timedelta

import pytest
from django.template import Context, Template

from reconciliation.charts import bar_chart
from tests.console.clients import client_for

# The loop templates/reconciliation/_hour_chart.html ran before (commit 7f0a153), verbatim.
LOOP = (
    '{% for bar in chart.bars %}<rect class="track" x="{{ bar.x }}" y="0" width="{{ bar.width }}" '
    'height="{{ chart.height }}"></rect>{% if bar.value %}<rect class="bar" x="{{ bar.x }}" '
    'y="{{ bar.y }}" width="{{ bar.width }}" height="{{ bar.height }}"><title>{{ bar.label }}</title>'
    "</rect>{% endif %}{% endfor %}"
)
START = datetime(2026, 12, 7, 1, tzinfo=UTC)


def _series(values: list[int]) -> list[dict]:
    return [
        {"hour": START + timedelta(hours=n), "delivered": v, "failed": v % 3}
        for n, v in enumerate(values)
    ]


@pytest.mark.parametrize(
    "values",
    [
        [],
        [0] * 24,
        [7],
        [0, 1, 0, 3, 1_000_000, 2, 0, 17, 5, 0, 0, 1, 99, 1, 0, 0, 4, 3, 0, 1, 2, 3, 0, 250],
        list(range(24)),
    ],
)
@pytest.mark.parametrize("height", [90, 37])
def test_the_charts_rects_are_the_loop_they_replaced(values, height):
    for key in ("delivered", "failed"):
        chart = bar_chart(_series(values), key, height=height)
        assert chart.rects() == Template(LOOP).render(Context({"chart": chart}))


@pytest.mark.django_db(databases=["default", "delivery"])
def test_the_health_page_draws_its_hours_tracks(world):
    page = client_for(world["olga"]).get("/health/")
    assert page.status_code == 200
    # A track for each of the 24 hours in both charts, whatever the hours held.
    assert page.content.count(b'<rect class="track"') == 48
