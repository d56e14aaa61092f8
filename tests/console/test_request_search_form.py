"""The approvals queue, the Requests page and My requests offer one request search (`approvals/_request_search.html`):
the same box, label and hint on each, and the same reason under it when a search cannot be read (a 400 that
still shows the page). Compared page against page, so that the three cannot drift apart."""

import re

import pytest

from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

# Who searches each page: an approver, an operator, a requester of workspace 7.
PAGES = {
    "queue": ("alice", "/approvals/"),
    "requests page": ("olga", "/approvals/search/"),
    "my requests": ("bob", "/approvals/mine/"),
}
LABEL = "Search: client, e-mail, searchable field, key or request"
TOO_LONG = "fjord " * 40


def _search_form(world, page: str, typed: str, status: int) -> str:
    viewer, path = PAGES[page]
    response = client_for(world[viewer]).get(path, {"q": typed})
    assert response.status_code == status, (page, response.status_code)
    [form] = re.findall(r'<form [^>]*role="search".*?</form>', response.content.decode(), re.S)
    return form


def _without_own_address(form: str) -> str:
    """The form as every page should have it: each submits to, and clears at, its own address."""
    return re.sub(r'(?:action|href)="[^"]*"', "", form)


@pytest.mark.parametrize(
    ("typed", "status"), [("fjord", 200), (TOO_LONG, 400), ("onboarding:7:" + "9" * 30 + ":1", 400)]
)
def test_the_three_request_lists_render_the_same_search_form(world, typed, status):
    forms = {page: _search_form(world, page, typed, status) for page in PAGES}
    assert len({_without_own_address(form) for form in forms.values()}) == 1, forms
    form = forms["queue"]
    assert 'name="q"' in form and f'<label for="request-search">{LABEL}</label>' in form
    assert 'id="request-search-hint"' in form and "a payload hash" in form
    for page, (_viewer, path) in PAGES.items():
        assert f'action="{path}"' in forms[page], page


def test_a_search_that_cannot_be_read_shows_its_reason_under_the_box_on_each_list(world):
    for page in PAGES:
        form = _search_form(world, page, TOO_LONG, 400)
        [error] = re.findall(r'<p class="error" id="request-search-error"[^>]*>(.*?)</p>', form)
        assert error == "Not searched: a search is at most 200 characters (this one has 239).", page
        assert 'aria-invalid="true"' in form, page
