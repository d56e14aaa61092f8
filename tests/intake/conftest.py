import json

import pytest

from tests.factories import onboarding_world
from tests.intake.triggers import TRIGGERS_URL, sign


@pytest.fixture
def world():
    return onboarding_world()


@pytest.fixture
def post_signed(client):
    """POST a body with the given headers (or signed now with the intake secret)."""

    def _post(
        document=None, *, body: str | None = None, headers: dict | None = None, **sign_kwargs
    ):
        body = json.dumps(document) if body is None else body
        headers = sign(body, **sign_kwargs) if headers is None else headers
        return client.generic(
            "POST",
            TRIGGERS_URL,
            data=body.encode("utf-8"),
            content_type="application/json",
            headers=headers,
        )

    return _post


@pytest.fixture
def send(post_signed):
    """Send a trigger document, freshly signed, with an optional fixed webhook id."""

    def _send(document: dict, *, msg_id: str | None = None, **sign_kwargs):
        return post_signed(document, msg_id=msg_id, **sign_kwargs)

    return _send
