"""The layout: a nav of the pages each user may use, a skip link, 403s that name the page; the handoff
list's address that always holds the filter on screen, and its search over payload fields."""

import re

import pytest

from approvals.models import Role
from tests.builders import approve
from tests.console.clients import HTMX, client_for
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _nav(body: str) -> list[str]:
    nav = body[body.index('<nav aria-label="Main"') :].split("</nav>")[0]
    return re.findall(r">([^<]+)</a>", nav)


def test_nav_shows_only_the_pages_each_role_may_use(world):
    assert _nav(client_for(world["bob"]).get("/").content.decode()) == [
        "New request",
        "My requests",
        "Requests",
        "Handoffs",
        "Triggers",
        "Observation",
    ]
    assert _nav(client_for(world["alice"]).get("/").content.decode()) == [
        "Approvals",
        "Delegates",
        "Requests",
        "Handoffs",
        "Triggers",
        "Observation",
    ]
    assert _nav(client_for(world["olga"]).get("/").content.decode()) == [
        "Requests",
        "Handoffs",
        "Triggers",
        "Observation",
        "Health",
        "Incidents",
        "Destinations",
        "Findings",
        "Runs",
        "Role changes",
        "Audit export",
    ]


def test_user_without_workspace_sees_no_console_links(world):
    nobody = make_user("nobody")
    assert _nav(client_for(nobody).get("/").content.decode()) == []


def test_every_page_has_a_skip_link_to_the_main_region(world):
    body = client_for(world["alice"]).get("/approvals/").content.decode()
    assert '<a class="skip-link" href="#main">Skip to content</a>' in body
    assert '<main id="main"' in body


@pytest.mark.parametrize(
    ("url", "page"),
    [
        ("/reconciliation/findings/", "Findings"),
        ("/reconciliation/runs/", "Runs"),
        ("/health/", "Health"),
        ("/approvals/mine/", "My requests"),
    ],
)
def test_each_refusal_names_the_page_it_refuses(world, url, page):
    response = client_for(world["alice"]).get(url)
    body = response.content.decode()
    assert response.status_code == 403
    assert f"Not allowed: {page}</h1>" in body
    assert "health dashboard" not in body or page == "Health"


def test_htmx_filter_answer_names_the_address_of_the_filter_on_screen(world, pending):
    response = client_for(world["olga"]).get(
        "/handoffs/", {"state": "delivered", "q": "", "workspace": "7"}, **HTMX
    )
    assert response["HX-Push-Url"] == "/handoffs/?workspace=7&state=delivered"
    cleared = client_for(world["olga"]).get("/handoffs/", {"state": ""}, **HTMX)
    assert cleared["HX-Push-Url"] == "/handoffs/"


def test_background_refresh_keeps_the_address_as_it_is(world, pending):
    response = client_for(world["olga"]).get(
        "/handoffs/", {"state": "pending"}, HTTP_X_CONSOLE_REFRESH="1", **HTMX
    )
    assert response.status_code == 200 and "HX-Push-Url" not in response
    assert pending.action_key in response.content.decode()


def test_back_button_restore_gets_the_whole_page(world, pending):
    response = client_for(world["olga"]).get(
        "/handoffs/", {"state": "pending"}, HTTP_HX_HISTORY_RESTORE_REQUEST="true", **HTMX
    )
    body = response.content.decode()
    assert "<html" in body and 'value="pending" selected' in body


def test_search_box_sends_one_request_on_enter(world):
    body = client_for(world["olga"]).get("/handoffs/").content.decode()
    form = body[body.index('<form id="handoff-filters"') :].split(">")[0]
    # Enter submits; a text box's change is not a trigger of its own (it would send the GET twice).
    assert 'hx-trigger="submit, change from:(#handoff-filters select)"' in form


def test_search_finds_handoffs_by_client_name_email_and_key(world):
    """A free-text field is found only where the workflow marks it searchable (test_search_by_what_people_know)."""
    contoso = approve(
        world,
        number=43,
        payload={
            "client_name": "Contoso Ltd",
            "contact_email": "a@contoso.example",
            "plan": "enterprise",
            "notes": "Needs a Danish invoice",
        },
    )
    northwind = approve(world)
    olga = client_for(world["olga"])
    for text in ("contoso", "A@Contoso.example", "onboarding:7:43"):
        body = olga.get("/handoffs/", {"q": text}).content.decode()
        assert f'id="handoff-{contoso.pk}"' in body, text
        assert f'id="handoff-{northwind.pk}"' not in body, text


def test_search_by_request_number_matches_the_request_not_digits_elsewhere(world):
    northwind = approve(world)
    other = approve(world, number=142)
    olga = client_for(world["olga"])
    for text in ("42", "request 42"):
        body = olga.get("/handoffs/", {"q": text}).content.decode()
        assert f'id="handoff-{northwind.pk}"' in body and f'id="handoff-{other.pk}"' not in body, (
            text
        )


def test_list_marks_its_results_for_refresh_while_visible(world, pending):
    body = client_for(world["olga"]).get("/handoffs/").content.decode()
    assert 'data-refresh-seconds="15" data-refresh-target="handoff-results"' in body
    assert "/static/js/console.js" in body


def test_operator_of_workspace_8_only_does_not_get_requester_links(world):
    body = client_for(world["otto"]).get("/").content.decode()
    assert "New request" not in _nav(body) and "Health" in _nav(body)
    assert Role.OPERATOR in body


def test_server_error_page_is_the_consoles_own_and_says_nothing_was_half_applied(rf):
    from django.views.defaults import server_error

    response = server_error(rf.get("/handoffs/"))
    body = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in body and "half-applied" in body
    assert "Traceback" not in body


def test_client_names_in_rows_go_through_the_payload_redaction(world):
    from tests.factories import make_request

    make_request(
        world["w7"],
        44,
        world["bob"],
        payload={
            "client_name": "Ann ann@private.example",
            "contact_email": "a@b.example",
            "plan": "starter",
        },
    )
    queue = client_for(world["alice"]).get("/approvals/").content.decode()
    mine = client_for(world["bob"]).get("/approvals/mine/").content.decode()
    assert "Ann " in queue and "ann@private.example" not in queue
    assert "Ann " in mine and "ann@private.example" not in mine
