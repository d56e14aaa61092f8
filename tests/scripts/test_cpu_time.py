"""scripts/cpu_time.py, which `make test` runs under: the CPU a command's process tree and the machine's
PostgreSQL spent for it, the ceiling that CPU sets on its wall time, and the command's own exit status."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"


def cpu_time(tmp_path, *command: str) -> tuple[subprocess.CompletedProcess, dict]:
    """scripts/cpu_time.py run on `command`: its answer and the figures it wrote."""
    figures_file = tmp_path / "cpu.json"
    done = subprocess.run(
        [sys.executable, "scripts/cpu_time.py", "--json", str(figures_file), "--", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, json.loads(figures_file.read_text())


def test_a_grandchilds_cpu_is_counted_and_the_exit_status_is_the_commands(tmp_path):
    # The CPU is spent by a grandchild (bash runs python), as make runs pytest.
    done, figures = cpu_time(tmp_path, "bash", "-c", f"{sys.executable} -c '{BURN}'; exit 3")
    assert done.returncode == 3, done.stderr
    assert figures["exit_status"] == 3
    assert figures["cpu_seconds"]["tree"] >= 0.45
    assert figures["cores"] == os.cpu_count()
    assert figures["ceiling_seconds"] == pytest.approx(
        figures["cpu_seconds"]["total"] / figures["cores"], abs=0.1
    )
    assert "of wall time for" in done.stdout and "exit 3 ==" in done.stdout


@pytest.mark.postgres
def test_the_cpu_of_the_machines_postgresql_spent_for_the_command_is_counted(tmp_path):
    host = os.environ.get("PGHOST", "/var/run/postgresql")
    # A query whose CPU is the server backend's, not the client's: about 0.1 s a 4,000,000 rows on fast cores,
    # so 20,000,000 stays well above the 0.2 s asked whatever the cores.
    query = "SELECT count(*) FROM generate_series(1, 20000000)"
    done, figures = cpu_time(tmp_path, "psql", "-h", host, "-d", "postgres", "-Atc", query)
    assert done.returncode == 0, done.stderr
    assert figures["cpu_seconds"]["postgresql"] >= 0.2, figures
    assert figures["cpu_seconds"]["postgresql"] > figures["cpu_seconds"]["tree"], figures
