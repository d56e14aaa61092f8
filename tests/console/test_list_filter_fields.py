"""The handoff list's filter fields are drawn once for each set of values and choices (issue 40: through Django's
widget templates they were a sixth of a list page's CPU), and every page still shows the filter it was asked
for: its own values selected, the viewer's own workspaces and operators offered."""

import pytest
from django.test.signals import template_rendered

from approvals.models import Role
from tests.console.clients import client_for
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

WIDGET = "django/forms/widgets/select.html"


def _page(client, query: dict) -> tuple[str, list[str]]:
    drawn = []

    def seen(sender, template, context, **kwargs):
        drawn.append(template.name)

    template_rendered.connect(seen)
    try:
        answer = client.get("/handoffs/", query)
    finally:
        template_rendered.disconnect(seen)
    assert answer.status_code == 200
    return answer.content.decode(), drawn


def test_the_same_filter_is_drawn_once_and_each_page_shows_its_own_values_and_choices(world):
    olga = client_for(world["olga"])
    first, drawn = _page(olga, {"state": "pending", "reason_code": "<http_503>"})
    assert WIDGET in drawn
    again, drawn = _page(olga, {"state": "pending", "reason_code": "<http_503>"})
    assert WIDGET not in drawn
    for page in (first, again):
        assert '<option value="pending" selected>' in page
        assert 'value="&lt;http_503&gt;"' in page

    other, _ = _page(olga, {"state": "delivered"})
    assert '<option value="delivered" selected>' in other
    assert '<option value="pending" selected>' not in other
    assert 'value="&lt;http_503&gt;"' not in other

    newcomer = make_user("nora", workspace=world["w7"], roles=(Role.OPERATOR,))
    page, drawn = _page(client_for(newcomer), {"state": "pending"})
    # A new operator in the workspace changes the owner choices: drawn afresh, and offered.
    assert WIDGET in drawn
    assert ">nora</option>" in page
