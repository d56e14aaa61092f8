"""`make test`'s streams select every test of the suite exactly once per database it needs: none runs twice
(time lost on the critical path) and none in no stream (a test nobody runs); on SQLite, every test that SQLite
can run. The streams are read from the Makefile as make prints them (`make -n test-suites`: their markers, paths
and ignored paths), the suite is collected once in a process of its own, and each stream's selection is worked
out the way pytest's `-m` does. A test that asks for no database and that SQLite runs is the same on both: it
runs in the SQLite streams only.

The Makefile is the same whatever database a run is on, and these tests ask for none: they run in the SQLite
streams only (the collection costs 13 s of CPU, which the PostgreSQL rest stream paid as well)."""

import functools
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

import pytest
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
        return _expression(self.markers).evaluate(lambda name, **_: name in markers)


@functools.cache
def _expression(markers: str) -> Expression:
    """A `-m` expression compiled once: each test asks it of every collected test for every stream."""
    return Expression.compile(markers)


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


# What the SQLite streams run between them: every test but those that need PostgreSQL (they skip on SQLite), the
# browser's and the demo's (run once, on PostgreSQL).
SQLITE_RUNS = "not postgres and not browser and not demo"


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> dict[str, set[str]]:
    """The suite's tests and their markers, collected once for the module's tests."""
    tests = collected_markers(tmp_path_factory.mktemp("streams"))
    assert len(tests) > 1000
    return tests


def _selected_once(streams: list[Stream], tests: dict[str, set[str]]) -> tuple[list, dict]:
    """The tests no stream selects, and those that several do (with their names)."""
    selected_by = {
        nodeid: [s.name for s in streams if s.selects(nodeid, markers)]
        for nodeid, markers in tests.items()
    }
    in_none = sorted(n for n, names in selected_by.items() if not names)
    in_several = {n: names for n, names in selected_by.items() if len(names) > 1}
    return in_none, in_several


def _runs_on_sqlite(markers: set[str]) -> bool:
    return _expression(SQLITE_RUNS).evaluate(lambda name, **_: name in markers)


def test_the_postgresql_streams_of_make_test_select_every_test_exactly_once(collected):
    """Every test once, but those that ask for no database and that the SQLite streams run: none of the
    PostgreSQL streams runs those again (tests/conftest.py marks them `no_database`)."""
    streams = make_streams()
    postgres = [s for s in streams if not s.name.endswith("(sqlite)")]
    assert postgres, f"make -n test-suites printed {streams}"
    once_on_sqlite = {
        nodeid
        for nodeid, markers in collected.items()
        if "no_database" in markers and _runs_on_sqlite(markers)
    }
    assert len(once_on_sqlite) > 100
    needs_postgresql = {n: m for n, m in collected.items() if n not in once_on_sqlite}
    in_none, in_several = _selected_once(postgres, needs_postgresql)
    assert in_none == [], f"{len(in_none)} tests in no PostgreSQL stream: {in_none[:20]}"
    assert in_several == {}, f"tests in several streams: {dict(list(in_several.items())[:20])}"
    again = [
        (s.name, nodeid)
        for s in postgres
        for nodeid in sorted(once_on_sqlite)
        if s.selects(nodeid, collected[nodeid])
    ]
    assert again == [], f"tests of no database that a PostgreSQL stream runs again: {again[:20]}"


def test_the_sqlite_streams_of_make_test_select_every_test_sqlite_runs_exactly_once(collected):
    sqlite = [s for s in make_streams() if s.name.endswith("(sqlite)")]
    assert sqlite, "no SQLite stream"
    on_sqlite = {n: markers for n, markers in collected.items() if _runs_on_sqlite(markers)}
    assert len(on_sqlite) > 1000
    in_none, in_several = _selected_once(sqlite, on_sqlite)
    assert in_none == [], f"{len(in_none)} tests in no SQLite stream: {in_none[:20]}"
    assert in_several == {}, f"tests in several streams: {dict(list(in_several.items())[:20])}"
    beyond = [
        (s.name, nodeid)
        for s in sqlite
        for nodeid, markers in collected.items()
        if nodeid not in on_sqlite and s.selects(nodeid, markers)
    ]
    assert beyond == [], f"tests a SQLite stream runs that SQLite cannot: {beyond[:20]}"
