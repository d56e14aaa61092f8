"""The dispatcher's wake-up listener on PostgreSQL: a NOTIFY committed with a handoff wakes it, through the
database's own parameters or through HANDOFF_LISTEN_DATABASE_URL (the route past a transaction-mode pooler),
and a listener that cannot connect polls instead of failing."""

import threading
import time

import pytest
from django.db import connections, transaction

from outbox.dispatch.runner import listen_for_wakeups
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


def _libpq_options(listener: WakeListener) -> dict[str, str]:
    """The parameters libpq opened the listening session with (`PQconninfo`)."""
    return {
        option.keyword.decode(): (option.val or b"").decode()
        for option in listener._conn.pgconn.info
    }


KEEPALIVES = {
    "keepalives_idle": 7,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 9000,
}


def test_the_listening_session_keeps_the_database_urls_keepalives_and_connect_timeout(
    settings, monkeypatch
):
    """A session cut silently (a partition, a failover) is noticed only by TCP keepalives or the user
    timeout: the LISTEN session must be opened with those of DATABASE_URL, as the dispatcher's own are."""
    settings.HANDOFF_LISTEN_DATABASE_URL = ""
    options = {
        **connections["default"].settings_dict.get("OPTIONS", {}),
        **KEEPALIVES,
        "connect_timeout": 3,
    }
    monkeypatch.setitem(connections["default"].settings_dict, "OPTIONS", options)
    listener = WakeListener()
    try:
        opened = _libpq_options(listener)
        assert {key: opened[key] for key in KEEPALIVES} == {
            k: str(v) for k, v in KEEPALIVES.items()
        }
        assert opened["connect_timeout"] == "3"
    finally:
        listener.close()


def test_the_listening_session_keeps_the_listen_urls_keepalives(settings):
    query = "&".join(f"{key}={value}" for key, value in KEEPALIVES.items())
    url = _test_database_url()
    settings.HANDOFF_LISTEN_DATABASE_URL = f"{url}{'&' if '?' in url else '?'}{query}"
    listener = WakeListener()
    try:
        opened = _libpq_options(listener)
        assert {key: opened[key] for key in KEEPALIVES} == {
            k: str(v) for k, v in KEEPALIVES.items()
        }
        assert opened["connect_timeout"] == "5"  # the listener's own when the URL names none
        assert _woken(listener) is True
    finally:
        listener.close()


def test_a_listening_thread_with_a_long_idle_sleep_ends_soon_after_the_stop():
    """`manage.py dispatch --idle-sleep 600` stopped by SIGTERM: the process joins its listening thread, which
    waited out the whole idle sleep before it saw the stop (the join gave up after 30 s)."""
    stop = threading.Event()
    listening = threading.Thread(
        target=listen_for_wakeups, args=(lambda _names: None, 600.0, stop), daemon=True
    )
    listening.start()
    time.sleep(0.5)  # in its wait
    stop.set()
    listening.join(timeout=20)
    assert not listening.is_alive()
