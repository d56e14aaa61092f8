"""The per-file cost report (tests/costs.py) on a small run of its own: a child process's CPU is counted in the
file whose test reaped it, and a session fixture's setup in a row of its own, not in the first file that
asked for it."""

import json
import subprocess
import sys
import textwrap

from tests.processes import ROOT

# Each burner loops until its own CPU clock says it has used this much, however loaded the machine.
BURN_SECONDS = 0.3

BURN = f"""
import time

def burn():
    start = time.process_time()
    while time.process_time() - start < {BURN_SECONDS}:
        pass
"""


def test_children_and_session_fixtures_are_counted_where_they_belong(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "burn.py").write_text(BURN)
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from burn import burn

            @pytest.fixture(scope="session")
            def expensive():
                burn()
            """
        )
    )
    (tmp_path / "test_child.py").write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys

            def test_a_child_burns(expensive):
                subprocess.run([sys.executable, "-c", "from burn import burn; burn()"], check=True,
                               cwd={str(tmp_path)!r})
            """
        )
    )
    (tmp_path / "test_cheap.py").write_text("def test_nothing(expensive):\n    pass\n")
    report = tmp_path / "costs.json"

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.costs", "-p", "no:cacheprovider"]
        + ["--rootdir", str(tmp_path), str(tmp_path)],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{ROOT}:{tmp_path}",
            # The suite's own plugins (pytest-django, randomly) stay out of this small run.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "SUITE_COSTS": "5",
            "SUITE_COSTS_JSON": str(report),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "costs per test file (top 5 by CPU)" in done.stdout
    costs = json.loads(report.read_text())
    child, cheap = costs["test_child.py"], costs["test_cheap.py"]
    session = costs["(session) expensive"]
    assert child["tests"] == cheap["tests"] == 1
    assert child["cpu_children"] >= BURN_SECONDS
    assert cheap["cpu_children"] < BURN_SECONDS
    # The session fixture ran inside whichever file came first; neither file carries it.
    assert session["cpu_self"] >= BURN_SECONDS
    assert child["cpu_self"] < BURN_SECONDS
    assert cheap["cpu_self"] < BURN_SECONDS
    assert costs["(whole run)"]["tests"] == 2
