"""What the server answers besides the console's pages (ASVS 13.4): no file of the repository, no directory
listing, and no TRACE method on any path."""

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def fixed_paths(patterns=None, prefix: str = "") -> list[str]:
    """Every path of the URL configuration that takes no parameter."""
    paths = []
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = str(pattern.pattern)
        if "<" in route or "(?P" in route or "[" in route:
            continue
        route = route.lstrip("^").rstrip("$").replace("\\", "")
        if isinstance(pattern, URLResolver):
            paths += fixed_paths(pattern.url_patterns, prefix + route)
        elif isinstance(pattern, URLPattern):
            paths.append("/" + prefix + route)
    return sorted(set(paths))


@pytest.mark.parametrize(
    "path",
    [
        "/.git/config",
        "/.git/HEAD",
        "/.env",
        "/var/run.env",
        "/pyproject.toml",
        "/manage.py",
        "/config/settings/__init__.py",
        "/static/../.git/config",
        "/static/../pyproject.toml",
        "/static/%2e%2e/pyproject.toml",
        "/.svn/entries",
    ],
)
def test_no_source_control_metadata_or_source_file_is_served(path):
    signed_in = Client()
    signed_in.force_login(make_user("root", is_superuser=True, is_staff=True))
    for client in (Client(), signed_in):
        answer = client.get(path)
        assert answer.status_code == 404, (path, answer.status_code)
        body = b"".join(answer) if answer.streaming else answer.content
        assert b"[core]" not in body and b"[project]" not in body and b"import " not in body


@pytest.mark.parametrize(
    "path", ["/static/", "/static/css/", "/static/js/", "/admin/", "/delivery/"]
)
def test_no_directory_is_listed(path):
    answer = Client().get(path)
    body = (b"".join(answer) if answer.streaming else answer.content).decode(errors="replace")
    assert answer.status_code in (302, 404), (path, answer.status_code)
    assert not re.search(r"Index of|Directory listing", body, flags=re.IGNORECASE)


def test_trace_is_refused_on_every_path_signed_in_or_not():
    signed_in = Client()
    signed_in.force_login(make_user("root", is_superuser=True, is_staff=True))
    paths = fixed_paths()
    assert len(paths) > 30, paths
    answered = {}
    for path in paths:
        for who, client in (("anonymous", Client()), ("superuser", signed_in)):
            answer = client.generic("TRACE", path)
            if answer.status_code != 405:
                answered[(who, path)] = answer.status_code
            assert b"TRACE " not in answer.content
    assert not answered, answered


MACHINE_REQUESTS = [
    ("post", "/delivery/api/tasks"),
    ("post", "/delivery/api/tasks/batch"),
    ("get", "/delivery/api/tasks/onboarding:7:42:1"),
    ("post", "/delivery/accounts/v1/accounts"),
    ("post", "/approvals/api/triggers"),
    ("post", "/reconciliation/api/destinations/receiver/status-events"),
    ("get", "/metrics"),
]


@pytest.mark.parametrize(("method", "path"), MACHINE_REQUESTS)
def test_the_machines_endpoints_over_plain_http_are_refused_not_redirected(settings, method, path):
    from delivery.models import ReceiverTask

    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    answer = (
        getattr(client, method)(path, data=b'{"action_key": "k"}', content_type="application/json")
        if method == "post"
        else client.get(path, HTTP_AUTHORIZATION="Bearer metrics-test-token")
    )
    assert answer.status_code == 403, (path, answer.status_code, answer.get("Location"))
    assert "HTTPS is required" in answer.content.decode()
    assert not ReceiverTask.objects.using("delivery").exists()
    secure = Client().get("/metrics", secure=True, HTTP_AUTHORIZATION="Bearer metrics-test-token")
    assert secure.status_code == 200


def test_pages_are_still_redirected_to_https_and_probes_answered(settings):
    settings.SECURE_SSL_REDIRECT = True
    assert Client().get("/handoffs/").status_code == 301
    assert Client().get("/delivery/mailbox/").status_code == 301
    assert Client().get("/accounts/login/")["Location"] == "https://testserver/accounts/login/"
    assert Client().get("/healthz").status_code == 200
