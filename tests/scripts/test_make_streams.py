"""`make test`'s PostgreSQL streams select every test of the suite exactly once: none runs twice (time lost on
the critical path) and none in no stream (a test nobody runs). The streams are read from the Makefile as make
prints them (`make -n test-suites`: their markers, paths and ignored paths), the suite is collected once in a
process of its own, and each stream's selection is worked out the way pytest's `-m` does."""

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

from _pytest.mark.expression import Expression

from tests.processes import ROOT

# Written into the collecting process's path: every collected test's id and the names of its markers.
MARKERS_PLUGIN = """
import json, os

def pytest_collection_finish(session):
    with open(os.environ["STREAMS_MARKERS_OUT"], "w") as out:
        json.dump({i.nodeid: sorted({m.name for m in i.iter_markers()}) for i in session.items}, out)
"""


@dataclass
class Stream:
    name: str
    markers: str
    paths: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def selects(self, nodeid: str, markers: set[str]) -> bool:
        path = nodeid.split("::", 1)[0]
        if self.paths and not any(_under(path, p) for p in self.paths):
            return False
        if any(_under(path, p) for p in self.ignored):
            return False
        return Expression.compile(self.markers).evaluate(lambda name, **_: name in markers)


def _under(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def make_streams() -> list[Stream]:
    """Each `pytest` command of `make test`, as `make -n` prints it (nothing is run)."""
    printed = subprocess.run(
        ["make", "-n", "--no-print-directory", "test-suites"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.replace("\\\n", " ")
    streams = []
    for line in printed.splitlines():
        words = shlex.split(line)
        pytest_at = next((i for i, w in enumerate(words) if w.endswith("/bin/pytest")), None)
        if pytest_at is None:
            continue
        name = next(w.split("=", 1)[1] for w in words if w.startswith("HANDOFF_VAR_DIR="))
        on_sqlite = "-u" in words[:pytest_at] and "DATABASE_URL" in words[:pytest_at]
        stream = Stream(name=f"{name} (sqlite)" if on_sqlite else name, markers="")
        args = iter(words[pytest_at + 1 :])
        for word in args:
            if word == "-m":
                stream.markers = next(args)
            elif word.startswith("--ignore="):
                stream.ignored.append(word.removeprefix("--ignore="))
            elif not word.startswith("-"):
                stream.paths.append(word)
        streams.append(stream)
    return streams


def collected_markers(tmp_path) -> dict[str, set[str]]:
    (tmp_path / "streams_markers.py").write_text(MARKERS_PLUGIN)
    out = tmp_path / "markers.json"
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DELIVERY_DATABASE_URL")
    }
    env |= {
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
        "STREAMS_MARKERS_OUT": str(out),
        "HANDOFF_VAR_DIR": str(tmp_path / "var"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "streams_markers"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {nodeid: set(names) for nodeid, names in json.loads(out.read_text()).items()}


def test_the_postgresql_streams_of_make_test_select_every_test_exactly_once(tmp_path):
    streams = make_streams()
    postgres = [s for s in streams if not s.name.endswith("(sqlite)")]
    assert postgres, f"make -n test-suites printed {streams}"
    tests = collected_markers(tmp_path)
    assert len(tests) > 1000
    selected_by = {
        nodeid: [s.name for s in postgres if s.selects(nodeid, markers)]
        for nodeid, markers in tests.items()
    }
    in_none = sorted(n for n, names in selected_by.items() if not names)
    in_several = {n: names for n, names in selected_by.items() if len(names) > 1}
    assert in_none == [], f"{len(in_none)} tests in no PostgreSQL stream: {in_none[:20]}"
    assert in_several == {}, f"tests in several streams: {dict(list(in_several.items())[:20])}"
    assert [s.markers for s in streams if s.name.endswith("(sqlite)")], "no SQLite stream"
