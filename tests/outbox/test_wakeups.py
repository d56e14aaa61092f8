"""The dispatcher's wake-up listener on PostgreSQL: a NOTIFY committed with a handoff wakes it, through the
database's own parameters or through HANDOFF_LISTEN_DATABASE_URL (the route past a transaction-mode pooler),
and a listener that cannot connect polls instead of failing."""

import pytest
from django.db import connections, transaction

from outbox.dispatch.wakeups import WakeListener, wake_dispatcher_on_commit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _test_database_url() -> str:
    params = connections["default"].get_connection_params()
    host = params.get("host") or "localhost"
    port = f":{params['port']}" if params.get("port") else ""
    if host.startswith("/"):
        return f"postgresql:///{params['dbname']}?host={host}" + (
            f"&port={params['port']}" if port else ""
        )
    return f"postgresql://{host}{port}/{params['dbname']}"


def _notify_committed() -> None:
    with transaction.atomic():
        wake_dispatcher_on_commit()


def _woken(listener: WakeListener) -> bool:
    try:
        _notify_committed()
        return listener.wait(5.0)
    finally:
        listener.close()


def test_a_committed_handoff_wakes_the_listener_through_the_database_parameters(settings):
    settings.HANDOFF_LISTEN_DATABASE_URL = ""
    assert _woken(WakeListener()) is True


def test_the_listener_uses_its_own_url_when_one_is_set(settings):
    settings.HANDOFF_LISTEN_DATABASE_URL = _test_database_url()
    listener = WakeListener()
    assert listener._conn is not None
    assert listener._conn.info.dbname == connections["default"].get_connection_params()["dbname"]
    assert _woken(listener) is True


def test_a_listen_url_that_cannot_be_reached_falls_back_to_polling_and_logs_no_password(
    settings, caplog
):
    settings.HANDOFF_LISTEN_DATABASE_URL = "pgsql://bob:s3cret-pw@127.0.0.1:1/nowhere"
    listener = WakeListener()
    assert listener._conn is None
    assert "cannot LISTEN" in caplog.text and "s3cret-pw" not in caplog.text
    # Not woken, no exception: the loop polls every `timeout` seconds until the route is back.
    assert listener.wait(0.05) is False
    listener.close()


def test_a_rolled_back_transaction_wakes_nobody(settings):
    settings.HANDOFF_LISTEN_DATABASE_URL = _test_database_url()
    listener = WakeListener()
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            wake_dispatcher_on_commit()
            raise RuntimeError("rolled back")
        assert listener.wait(0.3) is False
    finally:
        listener.close()
