"""Refusals explain themselves in the console's own layout."""

from tests.console.clients import client_for


def test_forbidden_page_says_why_and_offers_a_way_back(world):
    response = client_for(world["alice"]).get("/health/")
    assert response.status_code == 403
    body = response.content.decode()
    assert "Not allowed" in body
    assert "for operators of a workspace" in body
    assert 'href="/"' in body


def test_not_found_page_does_not_reveal_other_workspaces(world, foreign, settings):
    settings.DEBUG = False
    response = client_for(world["olga"]).get(f"/handoffs/{foreign.pk}/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "belongs to a workspace you are not a member of" in body
    assert foreign.action_key not in body
