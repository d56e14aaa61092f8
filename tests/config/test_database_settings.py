"""The databases as the environment names them: a sqlite:// DATABASE_URL keeps the options the embedded
default sets (without them two web workers and a cluster failed with "database is locked"), and a
PostgreSQL URL behind a pooler in transaction mode switches off what a pooled session cannot keep."""

import json
import os
import subprocess
import sys

import pytest

from tests.processes import ROOT

# The settings alone, as a process reads them at start: DATABASES is the settings modules' own (no app sets it),
# so the child imports no app (0.5 s of CPU a child with `django.setup()`; docs/testing.md).
PRINT = (
    "from django.conf import settings; import json; "
    "d = settings.DATABASES['default']; "
    "print(json.dumps({'options': d['OPTIONS'], "
    "'no_server_cursors': d.get('DISABLE_SERVER_SIDE_CURSORS', False)}, default=str))"
)


def databases_with(**env) -> dict:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "DATABASE_TRANSACTION_POOLER")
    }
    result = subprocess.run(
        [sys.executable, "-c", PRINT],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.test_settings", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_sqlite_url_keeps_the_embedded_defaults_options(tmp_path):
    seen = databases_with(DATABASE_URL=f"sqlite:///{tmp_path / 'source.sqlite3'}")
    assert seen["options"] == {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }


@pytest.mark.parametrize("pooled", ["1", "0"])
def test_a_transaction_pooler_switches_off_server_cursors_and_prepared_statements(pooled):
    seen = databases_with(
        DATABASE_URL="postgres://app@db.example:6432/handoff", DATABASE_TRANSACTION_POOLER=pooled
    )
    assert seen["no_server_cursors"] is (pooled == "1")
    assert ("prepare_threshold" in seen["options"]) is (pooled == "1")
