"""The SQLite streams' test databases, migrated once and copied (docs/testing.md, "The SQLite streams").

pytest-django creates each in-memory test database and migrates it: about 17 s of CPU a process, nearly all of
it Django rendering migration states, for the `delivery` database as much as for `default` although it applies
none of the other apps' migrations. `make test` runs the SQLite suite in two processes side by side; with
HANDOFF_SQLITE_TEMPLATE naming a directory (the Makefile empties it before the streams start), the first
process to create an alias's test database migrates it and writes it to `<dir>/<alias>.sqlite3`, and the
others copy that file into their in-memory database (SQLite's online backup) before pytest-django's `migrate`,
which then finds nothing to apply. A lock file per alias makes the others wait for the first's write. Without
the variable (a run by hand) every process migrates its own, as before.
"""

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db.backends.sqlite3.creation import DatabaseCreation


def template_directory() -> Path | None:
    directory = os.environ.get("HANDOFF_SQLITE_TEMPLATE")
    return Path(directory) if directory else None


def copy_database(source: sqlite3.Connection, target: sqlite3.Connection) -> None:
    """`target` made a page-for-page copy of `source`: schema, rows and the migrations recorded as applied."""
    source.backup(target)


def write_template(source: sqlite3.Connection, path: Path) -> None:
    """`source` written to `path` whole or not at all: a reader never sees half a file."""
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    target = sqlite3.connect(partial)
    try:
        copy_database(source, target)
    finally:
        target.close()
    os.replace(partial, path)


def load_template(path: Path, target: sqlite3.Connection) -> None:
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        copy_database(source, target)
    finally:
        source.close()


@contextmanager
def _held(lock: Path) -> Iterator[None]:
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def databases_from_template(directory: Path) -> Iterator[None]:
    """While entered, an in-memory SQLite test database is loaded from `directory`'s template of its alias when
    there is one, and written there when there is none yet."""
    create, make_empty = DatabaseCreation.create_test_db, DatabaseCreation._create_test_db

    def create_test_db(self, *args, **kwargs):
        if not self.is_in_memory_db(self._get_test_db_name()):
            return create(self, *args, **kwargs)
        directory.mkdir(parents=True, exist_ok=True)
        template = directory / f"{self.connection.alias}.sqlite3"
        with _held(directory / f"{self.connection.alias}.lock"):
            self._template = template if template.exists() else None
            name = create(self, *args, **kwargs)
            if self._template is None:
                write_template(self.connection.connection, template)
        return name

    def _create_test_db(self, verbosity, autoclobber, keepdb=False):
        name = make_empty(self, verbosity, autoclobber, keepdb)
        if getattr(self, "_template", None) is not None:
            # Loaded into the connection pytest-django's migrate will use: an in-memory database lives as
            # long as a connection to it, and Django keeps this one open (it ignores close() in memory).
            self.connection.settings_dict["NAME"] = name
            self.connection.ensure_connection()
            load_template(self._template, self.connection.connection)
        return name

    DatabaseCreation.create_test_db = create_test_db
    DatabaseCreation._create_test_db = _create_test_db
    try:
        yield
    finally:
        DatabaseCreation.create_test_db = create
        DatabaseCreation._create_test_db = make_empty
