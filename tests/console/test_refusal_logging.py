"""A refused request is logged on one line (what and where), without the traceback Django attaches, so that
a real fault's traceback stands out; a server error keeps its traceback."""

import logging

import pytest

from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_a_refusal_is_logged_on_one_line(world, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client_for(world["bob"]).get("/health/")
    assert response.status_code == 403
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage().startswith("Forbidden") and "/health/" in record.getMessage()
    assert record.exc_info is None and "Traceback" not in caplog.text


def test_a_server_error_keeps_its_traceback():
    record = logging.LogRecord(
        "django.request",
        logging.ERROR,
        __file__,
        1,
        "Internal Server Error: /x",
        (),
        (RuntimeError, RuntimeError("boom"), None),
    )
    record.status_code = 500
    logger = logging.getLogger("django.request")
    assert all(f.filter(record) for f in logger.filters)
    assert record.exc_info is not None
