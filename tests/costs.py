"""Where a run's time goes, per test file (opt-in): `SUITE_COSTS=1 pytest ...` prints the 20 costliest files.

For each file: the wall time of its tests (setup, call and teardown, module fixtures included), the CPU time of
the pytest process (`RUSAGE_SELF`) and the CPU time of the child processes it reaped meanwhile
(`RUSAGE_CHILDREN`: receivers, dispatchers, gunicorn, SMTP and OIDC servers the tests started and waited for;
PostgreSQL's backends are not our children and are not counted). Session-scoped fixtures (the test databases'
creation and migration, a server shared by the run) are set up inside the first test that asks for them: their
cost is counted apart, under `(session) <fixture>`, so that the file that happened to come first is not blamed.
Collection is counted under `(collection)`.

`SUITE_COSTS=N` prints the top N (20 for any value that is not a number); `SUITE_COSTS_JSON=path` also writes
every row to `path` as JSON (docs/testing.md, "Where the time goes")."""

import json
import os
import resource
import time
from collections import defaultdict
from dataclasses import dataclass

import pytest


@dataclass
class Cost:
    tests: int = 0
    wall: float = 0.0
    cpu_self: float = 0.0
    cpu_children: float = 0.0

    @property
    def cpu(self) -> float:
        return self.cpu_self + self.cpu_children


def _sample() -> tuple[float, float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        time.perf_counter(),
        own.ru_utime + own.ru_stime,
        children.ru_utime + children.ru_stime,
    )


class SuiteCosts:
    def __init__(self, top: int, json_path: str | None):
        self.top = top
        self.json_path = json_path
        self.costs: dict[str, Cost] = defaultdict(Cost)
        self._started = _sample()
        self._fixture_depth = 0
        self._current_file = ""

    def _add(self, key: str, before: tuple[float, float, float], sign: float = 1.0) -> None:
        after = _sample()
        cost = self.costs[key]
        cost.wall += sign * (after[0] - before[0])
        cost.cpu_self += sign * (after[1] - before[1])
        cost.cpu_children += sign * (after[2] - before[2])

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collection(self, session):
        before = _sample()
        yield
        self._add("(collection)", before)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        key = self._current_file = item.nodeid.split("::", 1)[0]
        before = _sample()
        yield
        self._add(key, before)
        self.costs[key].tests += 1

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef):
        # A session fixture's setup is moved from the test that happened to need it first to a row of its own.
        outer = fixturedef.scope == "session" and self._fixture_depth == 0
        self._fixture_depth += 1
        before = _sample()
        try:
            yield
        finally:
            self._fixture_depth -= 1
            if outer:
                self._add(f"(session) {fixturedef.argname}", before)
                if self._current_file:
                    self._add(self._current_file, before, sign=-1.0)

    def pytest_terminal_summary(self, terminalreporter):
        total = Cost(tests=sum(c.tests for c in self.costs.values()))
        ended = _sample()
        total.wall = ended[0] - self._started[0]
        total.cpu_self = ended[1] - self._started[1]
        total.cpu_children = ended[2] - self._started[2]
        rows = sorted(self.costs.items(), key=lambda kv: kv[1].cpu, reverse=True)
        write = terminalreporter.write_line
        terminalreporter.section(f"costs per test file (top {self.top} by CPU)")
        write(f"{'cpu s':>8} {'pytest':>8} {'children':>8} {'wall s':>8} {'tests':>5}  file")
        for key, c in [("(whole run)", total), *rows[: self.top]]:
            write(
                f"{c.cpu:8.1f} {c.cpu_self:8.1f} {c.cpu_children:8.1f} {c.wall:8.1f} {c.tests:5d}  {key}"
            )
        if self.json_path:
            data = {key: {**vars(c), "cpu": c.cpu} for key, c in [("(whole run)", total), *rows]}
            with open(self.json_path, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)


def pytest_configure(config):
    raw = os.environ.get("SUITE_COSTS", "")
    if not raw or raw == "0":
        return
    top = int(raw) if raw.isdigit() and int(raw) > 1 else 20
    config.pluginmanager.register(
        SuiteCosts(top, os.environ.get("SUITE_COSTS_JSON")), "suite-costs"
    )
