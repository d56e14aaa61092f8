"""A pulled work status read over HTTP (`outbox/destinations/http/work_read.py`) whose OAuth2 token endpoint
answers 429 with Retry-After holds the destination as the API's own 429 does: on the database clock, worded as
the token endpoint's, the API never called, and nothing asked again while held. Against the accounts API and the
OAuth2 token server, each a process of its own. Both backends."""

import secrets

import pytest

from outbox.clock import db_now_plus
from outbox.services.destination_configs import destination_configs_apply
from outbox.services.work_pull import handoffs_pull_work_status
from tests.factories import retry_after_rows
from tests.outbox.destinations.oauth2_servers import start
from tests.outbox.destinations.test_oauth2_credentials import CLIENT_SECRET, SECRET_ENV, oauth2_auth
from tests.outbox.services.test_work_pull import (  # noqa: F401 (the fixture)
    accounts,
    accounts_entry,
    delivered_to,
    read_long_ago,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)


@pytest.fixture
def token_server(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)
    server = start("token", secrets.token_hex(16))
    try:
        yield server
    finally:
        server.stop()


def test_a_work_status_reads_token_endpoint_retry_after_holds_the_destination(  # noqa: F811
    accounts,  # noqa: F811
    token_server,
    settings,
):
    settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS = 600
    handoff = delivered_to("accounts", 60)  # sent with its bearer token
    destination_configs_apply(
        document={
            "destinations": [{**accounts_entry(accounts.url), "auth": oauth2_auth(token_server)}]
        },
        actor_label="test",
    )
    token_server.faults(rate_limited=300)

    handoffs_pull_work_status()
    [hold] = retry_after_rows("accounts")
    assert hold.reason == "the token endpoint's HTTP 429 with Retry-After 300 s"
    assert retry_after_rows("accounts").filter(
        ends_at__gt=db_now_plus(240), ends_at__lte=db_now_plus(300)
    )
    assert accounts.reads() == {}  # the API itself was not called
    assert len(token_server.state()["requests"]) == 1

    read_long_ago(handoff)
    handoffs_pull_work_status()  # held: neither the token endpoint nor the API is asked
    assert len(token_server.state()["requests"]) == 1
    assert accounts.reads() == {}
    handoff.refresh_from_db()
    assert handoff.work_status == ""
