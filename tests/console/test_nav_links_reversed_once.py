"""The nav's links are reversed once per name and URLconf, not at every page (issue 40: ten reverse() calls a
page were a twentieth of its CPU), and still point where reverse() points, the current page marked."""

import pytest
from django.urls import reverse

from console.templatetags import console_pages
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_a_second_page_reverses_none_of_its_nav_links(world, monkeypatch):
    client = client_for(world["olga"])
    assert client.get("/handoffs/").status_code == 200
    asked = []

    def counting(name, *args, **kwargs):
        asked.append(name)
        return reverse(name, *args, **kwargs)

    monkeypatch.setattr(console_pages, "reverse", counting)
    page = client.get("/health/")
    assert page.status_code == 200
    links = page.context["links"]
    assert len(links) > 3
    for link in links:
        assert link["url"] == reverse(link["url_name"])
        assert f'href="{link["url"]}"'.encode() in page.content
    assert [link["url_name"] for link in links if link["current"]] == ["reconciliation:health"]
    assert asked == []
