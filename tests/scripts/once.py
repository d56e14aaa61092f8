"""Tests of the repository's scripts and Makefile that no database changes: `make test` runs them once, in the
SQLite streams, not again in the PostgreSQL rest stream (docs/testing.md, "The SQLite streams")."""

import pytest
from django.conf import settings

IN_THE_SQLITE_STREAMS_ONLY = pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3",
    reason="checks a script, the same on every database: run once, in the SQLite streams",
)
