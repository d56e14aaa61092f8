"""The suite's WhiteNoise (tests/static_files.py, its scan of the static files kept for the process) answers
every request as WhiteNoise itself does: the same status, headers and body, also from a later instance that
reused the first one's scan."""

import pytest
from django.test import RequestFactory
from whitenoise.middleware import WhiteNoiseMiddleware

from tests.static_files import WhiteNoiseScannedOnce


def not_static(request):
    return "the application"


def answer(middleware, path: str):
    response = middleware(RequestFactory().get(path, HTTP_ACCEPT_ENCODING="gzip"))
    if response == "the application":
        return response
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, sorted(response.items()), body


@pytest.mark.parametrize(
    "path",
    [
        "/static/js/console.js",
        "/static/css/console.css",
        "/static/admin/css/base.css",
        "/static/js/missing.js",
        "/static/../pyproject.toml",
        "/approvals/",
    ],
)
def test_a_later_instance_answers_as_whitenoise_does(path):
    WhiteNoiseScannedOnce(not_static)
    later = WhiteNoiseScannedOnce(not_static)
    expected = answer(WhiteNoiseMiddleware(not_static), path)
    assert answer(later, path) == expected
    if path.endswith(("console.js", "console.css", "base.css")):
        assert expected[0] == 200


def test_the_suite_runs_it_in_whitenoises_place(settings):
    assert "tests.static_files.WhiteNoiseScannedOnce" in settings.MIDDLEWARE
    assert "whitenoise.middleware.WhiteNoiseMiddleware" not in settings.MIDDLEWARE
