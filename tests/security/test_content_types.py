"""Every response with a body names its media type, and a text one its charset (ASVS 4.1.1): each fixed path
of the URL configuration, asked signed out and by a superuser, and the plain-text answers of /metrics and the
switched-off password form."""

import re

import pytest
from django.test import Client

from tests.factories import make_user
from tests.security.test_server_surface import fixed_paths

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

TEXT_TYPES = ("text/", "application/xml", "+xml")


def body_of(answer) -> bytes:
    return b"".join(answer.streaming_content) if answer.streaming else answer.content


def content_type_problem(answer) -> str | None:
    if not body_of(answer):
        return None
    media = answer.headers.get("Content-Type", "")
    if not media:
        return "no Content-Type"
    kind = media.split(";")[0].strip().lower()
    charset = re.search(r"charset=\"?([\w-]+)", media, flags=re.IGNORECASE)
    if any(marker in kind for marker in TEXT_TYPES) and not charset:
        return f"{media!r} names no charset"
    return None


def test_every_console_answer_with_a_body_names_its_type_and_charset():
    superuser = Client(raise_request_exception=False)
    superuser.force_login(make_user("root", is_superuser=True, is_staff=True))
    problems = {}
    for path in fixed_paths():
        for who, client in (
            ("anonymous", Client(raise_request_exception=False)),
            ("root", superuser),
        ):
            problem = content_type_problem(client.get(path))
            if problem:
                problems[(who, path)] = problem
    assert not problems, problems


def test_the_plain_text_answers_name_their_charset(settings):
    checked = [
        Client().get("/metrics"),
        Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong"),
    ]
    settings.METRICS_TOKEN = ""
    checked.append(Client().get("/metrics"))
    settings.OIDC_ENABLED, settings.OIDC_LOCAL_PASSWORDS = True, "off"
    checked.append(Client().post("/accounts/login/", {"username": "a", "password": "b"}))
    assert [a.status_code for a in checked] == [401, 401, 503, 403]
    assert [a["Content-Type"] for a in checked] == ["text/plain; charset=utf-8"] * 4
