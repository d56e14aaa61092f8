"""bench/run.sh's BENCH_ONLY names one section; a name it does not know is refused before anything runs."""

import shutil
import subprocess

from tests.processes import ROOT


def test_bench_only_with_an_unknown_section_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "bench").mkdir()
    shutil.copy(ROOT / "bench" / "run.sh", tmp_path / "bench" / "run.sh")

    done = subprocess.run(
        ["bash", str(tmp_path / "bench" / "run.sh")],
        env={"PATH": "/usr/bin:/bin", "BENCH_ONLY": "tracng"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert "BENCH_ONLY=tracng: no such section; one of: e2e console reconcile" in done.stderr
    assert " tracing " in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bench"]  # no var/bench written
