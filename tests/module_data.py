"""Data a test module builds once and each of its tests sees as if freshly built.

`module_transaction(django_db_blocker)` opens a transaction on every database for a module-scoped fixture;
the module's tests run in savepoints inside it (pytest-django's `django_db` wraps each test in an atomic
block, which nests), so a test's writes are undone after it and the module's data after the last test. Only
for modules whose tests are all non-transactional: `transactional_db`, `live_server` and child processes
would not see uncommitted rows. The access matrix built its world for each of its 186 cells, about 0.1 s of
CPU each; built once, a cell costs its request alone.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction


@contextmanager
def module_transaction(django_db_blocker) -> Iterator[None]:
    """Open the transactions (build inside `with django_db_blocker.unblock():`); roll them back at the end."""
    opened = []
    with django_db_blocker.unblock():
        for alias in connections:
            atomic = transaction.atomic(using=alias)
            atomic.__enter__()
            opened.append((alias, atomic))
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            for alias, atomic in reversed(opened):
                transaction.set_rollback(True, using=alias)
                atomic.__exit__(None, None, None)
