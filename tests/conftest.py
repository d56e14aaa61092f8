import asyncio
import gc
import time
import weakref

import pytest
from django.db import connections
from django.test import TransactionTestCase
from hypothesis import settings as hypothesis_settings

from outbox.destinations import reset_destination
from tests.outbox.destinations.smtp_server import SmtpServer
from tests.processes import KernelPort
from tests.sqlite_template import databases_from_template, template_directory

# The scripted OpenID provider in a process of its own, for the sign-on tests of tests/sso and tests/security.
from tests.sso.scripted import scripted_provider  # noqa: F401

# Where a run's time goes per test file, when SUITE_COSTS is set (tests/costs.py).
pytest_plugins = ["tests.costs"]

# No per-example deadline for the property tests: Hypothesis fails a test whose one example outlasts 200 ms
# once, as happens when a loaded machine (two cores shared with PostgreSQL, gunicorn and Chromium) sets the
# process aside for a moment; what the properties check does not depend on time.
hypothesis_settings.register_profile("suite", deadline=None)
hypothesis_settings.load_profile("suite")


# The cyclic garbage collector in the pytest process: 9.0-9.7 s of 81-88 s of CPU in tests/approvals and
# tests/console on SQLite (6,800 collections, the young generation's every 700 allocations). What collection made
# (modules, test items, fixtures' definitions) lives until the run ends: frozen out of the collector's reach. The
# young generation is collected every 10,000 allocations and the oldest only after 1,000 of the middle one's
# (none in a stream; explicit `gc.collect()` calls still collect everything): 4.3-4.4 s of collections, 3-6 s
# less CPU (docs/testing.md, "The pytest process's collector").
def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 50, 1_000)


# The fixtures through which a test reaches a test database, as pytest-django reads them.
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "live_server",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
    }
)


def asks_for_a_database(item: pytest.Item) -> bool:
    """pytest-django gives a test a database only through its `django_db` mark, one of its fixtures or a Django
    test case class; any other test that reaches one fails ("Database access not allowed")."""
    if item.get_closest_marker("django_db"):
        return True
    if DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    cls = getattr(item, "cls", None)
    return cls is not None and issubclass(cls, TransactionTestCase)


# Before `-m` selects: the PostgreSQL rest streams of `make test` leave out what SQLite already ran and what no
# database changes (`no_database and not postgres`): 330 tests, 28 s of CPU (docs/testing.md, "Tests that use no
# database").
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if not asks_for_a_database(item):
            item.add_marker("no_database")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings):
    """With HANDOFF_SQLITE_TEMPLATE (`make test`'s SQLite streams), the in-memory test databases are copies of
    one migrated by the first stream to get there (tests/sqlite_template.py): pytest-django creates them after
    this fixture and before the first test that needs them."""
    directory = template_directory()
    if directory is None:
        yield
        return
    with databases_from_template(directory):
        yield


@pytest.fixture
def refused_port():
    """A local port where nothing listens for the test's whole length: the kernel chose it and the test holds it
    bound (tests/processes.py), so connections are refused and no other process can start listening there."""
    with KernelPort() as held:
        yield held.port


@pytest.fixture(autouse=True)
def _fresh_destination():
    reset_destination()
    yield
    reset_destination()


# How long the last test's own helpers (a live-server thread still answering, a child process exiting) get
# to let go of the test databases before the run fails: a poll with a deadline, not a measurement.
RELEASE_DEADLINE_SECONDS = 30.0


def _sessions_on(names: list[str]) -> list[tuple]:
    import psycopg

    from tests.processes import database_url

    # Through the maintenance database: a run of tests that use no database never created the test ones.
    with psycopg.connect(database_url("default"), dbname="postgres", autocommit=True) as conn:
        return conn.execute(
            "SELECT datname, pid, state, left(query, 80) FROM pg_stat_activity WHERE datname = ANY(%s) "
            "AND pid <> pg_backend_pid()",
            [names],
        ).fetchall()


def _created_by_the_run() -> list[str]:
    """The aliases whose test database pytest-django created: only those the run's tests ask for. A run of
    tests that use none (the hosts soak, `make soak`, whose databases are on a server of its own) creates none,
    and its DATABASE_URL may name a database that does not exist (a fresh machine)."""
    return [
        alias
        for alias in connections
        if connections[alias].settings_dict["NAME"]
        == connections[alias].creation._get_test_db_name()
    ]


@pytest.fixture(scope="session", autouse=True)
def _test_databases_released(django_db_setup, django_db_blocker):
    """The run fails when something still uses a test database once every test is done: pytest-django could
    not drop it and said so only in a warning, which is how connections left open under Playwright went
    unnoticed.

    Before the run, the test databases of the shared cluster commit without waiting for their WAL to reach the
    disk (`synchronous_commit = off`, which every session of the run, the child processes' too, inherits):
    a commit waited about 5 ms for the disk while the suites run side by side, against 0.4 ms without.
    What another session sees is unchanged (a commit is visible at once); only a crash of that cluster could
    lose the last commits, and no test crashes it (the tests that restart or crash PostgreSQL run servers
    of their own, tests/hosts/postgres_cluster.py, which keep the default)."""
    if connections["default"].vendor == "postgresql":
        with django_db_blocker.unblock():
            for alias in _created_by_the_run():
                name = connections[alias].settings_dict["NAME"]
                with connections[alias].cursor() as cursor:
                    cursor.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
            connections.close_all()
    yield
    if connections["default"].vendor != "postgresql":
        return
    names = [connections[alias].settings_dict["NAME"] for alias in _created_by_the_run()]
    connections.close_all()
    deadline = time.monotonic() + RELEASE_DEADLINE_SECONDS
    while (left := _sessions_on(names)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"test databases still in use after the last test: {left}"


@pytest.fixture(scope="session", autouse=True)
def _transactional_tests_flush_by_delete():
    """PostgreSQL's flush after a transactional test DELETEs from every table in one transaction instead of
    TRUNCATEing them all: every table is left empty either way (foreign keys are checked at the commit), and
    neither resets a sequence. A TRUNCATE gives each table a new file, and a commit that drops files waits for
    the WAL to reach the disk whatever `synchronous_commit` says: 0.2 s of the server's CPU and 1.5-3 s of wall
    time a test at load 5-18, against 0.02 s and 0.05 s for DELETEs of the few rows a test leaves
    (docs/testing.md)."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        return [
            "SET CONSTRAINTS ALL DEFERRED",
            *(f"DELETE FROM {self.quote_name(t)}" for t in tables),  # noqa: S608 (Django's tables)
        ]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "sql_flush", flush)
        yield


@pytest.fixture(scope="session", autouse=True)
def _flush_puts_back_the_migrated_content_types():
    """After the flush that ends a transactional test, the content types and permissions that the flush emptied
    are put back as rows saved from the first such flush, instead of by Django's `post_migrate` receivers, which
    rebuild them from every model of every app through the ORM: about 40 ms of the pytest process's CPU a
    transactional test, a twentieth of the SQLite "rest" stream's (docs/testing.md). The same rows as those
    receivers make, with the ids of the first time. Only while those two are the signal's only receivers, and
    never for a flush that resets sequences (the saved ids would be ahead of them)."""
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType
    from django.core.management.commands import flush
    from django.db import router
    from django.db.models.signals import post_migrate

    emit = flush.emit_post_migrate_signal
    handle = flush.Command.handle
    saved: dict[str, tuple[list[dict], list[dict]]] = {}

    def only_djangos_receivers() -> bool:
        names = [
            getattr(r() if isinstance(r, weakref.ReferenceType) else r, "__name__", "")
            for _, r, _ in post_migrate.receivers
        ]
        return sorted(names) == ["create_contenttypes", "create_permissions"]

    def rows(db: str, model) -> list[dict]:
        return (
            list(model.objects.using(db).values()) if router.allow_migrate_model(db, model) else []
        )

    def emit_or_put_back(verbosity, interactive, db, **kwargs):
        if db in saved and only_djangos_receivers():
            content_types, permissions = saved[db]
            ContentType.objects.using(db).bulk_create(ContentType(**r) for r in content_types)
            Permission.objects.using(db).bulk_create(Permission(**r) for r in permissions)
            ContentType.objects.clear_cache()
            return
        emit(verbosity, interactive, db, **kwargs)
        if only_djangos_receivers():
            saved[db] = (rows(db, ContentType), rows(db, Permission))

    def handle_keeping_sequences(self, **options):
        if options.get("reset_sequences", True):
            return handle(self, **options)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(flush, "emit_post_migrate_signal", emit_or_put_back)
            return handle(self, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flush.Command, "handle", handle_keeping_sequences)
        yield


@pytest.fixture(scope="session", autouse=True)
def _test_clients_share_the_middleware_chain():
    """Django's test client builds the whole middleware chain (25 classes imported and instantiated, each wrapped)
    for every new client, where a server builds it once a process: 2.4 % of the SQLite web half's CPU samples
    (docs/testing.md). A client now takes the chain the first one built, as the requests a server answers share
    one; any setting changed (the `settings` fixture, `override_settings`, at their start and their end) drops it,
    so that the next client builds it again from the settings then in force, as the middleware's `__init__`s read
    them."""
    from django.core.signals import setting_changed
    from django.test.client import ClientHandler

    load = ClientHandler.load_middleware
    built: dict[bool, ClientHandler] = {}

    def load_once(self, is_async=False):
        first = built.get(is_async)
        if first is None:
            load(self, is_async)
            built[is_async] = self
            return
        self._view_middleware = first._view_middleware
        self._template_response_middleware = first._template_response_middleware
        self._exception_middleware = first._exception_middleware
        self._middleware_chain = first._middleware_chain

    def forget(**kwargs):
        built.clear()

    setting_changed.connect(forget, weak=False, dispatch_uid="tests: one middleware chain")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ClientHandler, "load_middleware", load_once)
        yield
    setting_changed.disconnect(dispatch_uid="tests: one middleware chain")


@pytest.fixture(autouse=True)
def _close_connections_opened_under_playwright():
    """While Playwright's sync API is active its event loop counts as running in this thread, and Django then
    keeps the thread's connections per context (asgiref's Local), apart from the ones pytest-django closes
    before it drops the test databases: left open, they made that drop fail ("database ... is being accessed
    by other users") whenever a browser test had run. Closed after each test that ran under that loop."""
    yield
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    connections.close_all()


@pytest.fixture
def on_postgres() -> bool:
    return connections["default"].vendor == "postgresql"


@pytest.fixture
def mailbox(tmp_path, settings):
    """A real SMTP server in a process of its own, where the product's own e-mail goes (EMAIL_HOST:EMAIL_PORT,
    which the smtp destinations of e-mail alert channels and approval notices read when they are written)."""
    server = SmtpServer(tmp_path / "smtp")
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    yield server
    server.stop()
