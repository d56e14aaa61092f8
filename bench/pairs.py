"""Figures that can be believed on a shared machine: a reference and a subject measured back to back.

Every ratio is the median of at least `MIN_PAIRS` pairs; the order alternates (reference first in even
pairs, the subject first in odd ones) so that a machine getting busier or quieter favours neither side.
Each pair records the load average and the CPU time of two groups, the bench's own processes and
everything else, over a short window before it and over the pair itself. A pair during which everything
else used more than `max_others_share` of the machine's CPU is marked "loaded" and left out of the
median; the figure says how many were. A reference that collapsed (below `collapse_fraction` of its own
recorded idle figure or of the other pairs' median reference) makes the run a broken one: the figure is
refused and not published. docs/benchmarks.md, "How a figure is taken", is the reader's account.
"""

import functools
import json
import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

MIN_PAIRS = 3
MAX_OTHERS_SHARE = float(os.environ.get("BENCH_MAX_OTHERS_SHARE", "0.25"))
COLLAPSE_FRACTION = float(os.environ.get("BENCH_COLLAPSE_FRACTION", "0.5"))
# The window before each pair is shown beside it, never judged ("loaded" is the pair's own): half a second is 100
# clock ticks on 2 cores, a share to the percent, and a run of about 55 pairs waits 27 s less than with 1 s.
BEFORE_SECONDS = 0.5
TICKS = os.sysconf("SC_CLK_TCK")
IDLE_REFERENCES = Path(__file__).resolve().parents[1] / "var" / "bench" / "idle_references.json"
# PostgreSQL names the database in each backend's process title; the bench's databases share a prefix.
DB_PREFIX = os.environ.get("BENCH_DB_PREFIX", "bench")


class ProcStat(NamedTuple):
    parent: int
    cpu: float  # seconds, the process's and its reaped children's
    start: int  # clock ticks since boot: with the pid, one process even if the pid is reused


def _stat(pid: int) -> ProcStat | None:
    """The process's /proc/<pid>/stat, read once; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    # Fields after the command: state ppid ... utime(14) stime(15) cutime(16) cstime(17) ... starttime(22).
    return ProcStat(
        int(fields[1]), sum(int(value) for value in fields[11:15]) / TICKS, int(fields[19])
    )


def _is_bench_backend(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            title = cmdline.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return title.startswith("postgres: ") and f" {DB_PREFIX}_" in title


def _machine_busy_seconds() -> float:
    """CPU seconds spent on anything but idle and iowait, over all cores, since boot."""
    with open("/proc/stat") as stat:
        values = [int(value) for value in stat.readline().split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / TICKS


SAMPLE_SECONDS = 0.2


class _Backends:
    """The CPU of the PostgreSQL backends on the bench's databases, the ones that have exited included.

    A backend is the postmaster's child, not the bench's, and once it exits (pgbench's connections end with
    its run, a dispatcher's with the dispatcher) `/proc` forgets its CPU while the machine's busy time keeps
    it: read only at a window's two ends, that CPU was counted as everybody else's, and the pairs against
    pgbench were all "loaded" on an idle machine. So the backends are sampled every SAMPLE_SECONDS from the
    first snapshot on, by one thread for the process (`BACKENDS`), and a backend gone since the last sample
    adds the CPU it was last seen with."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._titles: dict[tuple[int, int], bool] = {}  # (pid, start) -> is a bench backend
        # Live bench backends: their CPU when last sampled.
        self._seen: dict[tuple[int, int], float] = {}
        self._gone = 0.0
        self._exclude: set[int] = set()
        self._thread: threading.Thread | None = None

    def _sample_locked(self, stats: dict[int, ProcStat], exclude: set[int]) -> float:
        live: dict[tuple[int, int], float] = {}
        booted = _uptime_ticks()
        for pid, (_, cpu, start) in stats.items():
            if pid in exclude:
                continue
            key = (pid, start)
            if key not in self._titles:
                is_backend = _is_bench_backend(pid)
                # A backend shows the postmaster's title until it has read its startup packet: a "no" for
                # a process younger than a second is asked again at the next sample, not kept.
                if is_backend or booted - start > TICKS:
                    self._titles[key] = is_backend
                if not is_backend:
                    continue
            if self._titles.get(key, False):
                live[key] = cpu
        self._gone += sum(cpu for key, cpu in self._seen.items() if key not in live)
        for key in [key for key in self._titles if key[0] not in stats]:
            del self._titles[key]
        self._seen = live
        return sum(live.values()) + self._gone

    def cpu(self, stats: dict[int, ProcStat], exclude: set[int]) -> float:
        """Live and exited bench backends' CPU; `exclude`: pids counted otherwise (the bench's own tree,
        the processes named outside), also left out by the samples in between."""
        with self._lock:
            self._exclude = exclude
            total = self._sample_locked(stats, exclude)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, daemon=True, name="bench-backends"
                )
                self._thread.start()
            return total

    def _run(self) -> None:
        while True:
            time.sleep(SAMPLE_SECONDS)
            stats = _all_stats()
            with self._lock:
                self._sample_locked(stats, self._exclude)


BACKENDS = _Backends()


def _uptime_ticks() -> float:
    """The time since boot, in the clock ticks a process's start time is counted in."""
    with open("/proc/uptime") as uptime:
        return float(uptime.read().split()[0]) * TICKS


def _all_stats() -> dict[int, ProcStat]:
    return {int(n): s for n in os.listdir("/proc") if n.isdigit() and (s := _stat(int(n)))}


def shown(ratio: float) -> str:
    """A judged ratio with 2 decimals, never above what was measured: rounded down, so that 0.896 against an
    aim of 0.9 reads 0.89 beside "missed" (rounded to the nearest it read 0.90, as if met)."""
    return f"{math.floor(ratio * 100 + 1e-9) / 100:.2f}"


@dataclass(frozen=True)
class CpuGroups:
    """Who is the bench: `root` and its descendants, and PostgreSQL's backends on the bench's databases.
    Everything else is the rest of the machine (from /proc/stat), or with `outside` only those pids."""

    root: int = field(default_factory=os.getpid)
    outside: Callable[[], Iterable[int]] | None = None
    # One sampler for the process, whatever number of groups a bench makes (each `watched` makes one).
    backends: _Backends = field(default_factory=lambda: BACKENDS, compare=False, repr=False)

    def snapshot(self) -> dict:
        stats = _all_stats()
        children: dict[int, list[int]] = {}
        for pid, (parent, _, _) in stats.items():
            children.setdefault(parent, []).append(pid)
        outside = set(self.outside()) if self.outside else set()
        bench, todo = set(), [self.root]
        while todo:
            pid = todo.pop()
            if pid not in bench and pid not in outside:
                bench.add(pid)
                todo.extend(children.get(pid, ()))
        bench_cpu = sum(stats[pid].cpu for pid in bench if pid in stats)
        bench_cpu += self.backends.cpu(stats, exclude=bench | outside)
        if self.outside is None:
            others_cpu = _machine_busy_seconds() - bench_cpu
        else:
            others_cpu = sum(stats[pid].cpu for pid in outside if pid in stats)
        return {"at": time.monotonic(), "bench_cpu": bench_cpu, "others_cpu": others_cpu}


@dataclass
class Window:
    """The load average at its end and each group's share of the machine's CPU over it."""

    seconds: float
    load_average: float
    bench_share: float
    others_share: float


def window(first: dict, last: dict) -> Window:
    seconds = max(last["at"] - first["at"], 1e-6)
    capacity = seconds * (os.cpu_count() or 1)
    return Window(
        seconds=round(seconds, 3),
        load_average=round(os.getloadavg()[0], 2),
        bench_share=round(max(last["bench_cpu"] - first["bench_cpu"], 0) / capacity, 3),
        others_share=round(max(last["others_cpu"] - first["others_cpu"], 0) / capacity, 3),
    )


@dataclass
class Pair:
    index: int
    first: str  # "reference" or "subject"
    reference: float
    subject: float
    ratio: float
    before: Window
    during: Window
    loaded: bool = False
    collapsed: str = ""
    # What `settle` found before each side's run (by side), when the pairs were settled.
    settled: dict = field(default_factory=dict)


@dataclass
class PairedFigure:
    """The outcome: `ratio` is None when the figure is refused (`refused` says why)."""

    name: str
    pairs: list[Pair]
    max_others_share: float
    collapse_fraction: float
    idle_reference: float | None
    ratio: float | None = None
    refused: str = ""

    @property
    def left_out(self) -> int:
        return sum(pair.loaded for pair in self.pairs)

    @property
    def kept(self) -> list[Pair]:
        return [pair for pair in self.pairs if not pair.loaded]

    def as_json(self) -> dict:
        return {**asdict(self), "left_out": self.left_out, "published": self.ratio is not None}

    def describe(self) -> str:
        """One line for the report; a refused figure gives its reason and no number."""
        load = max(pair.during.load_average for pair in self.pairs)
        counted = (
            f"{len(self.pairs)} pairs, {self.left_out} left out (others above "
            f"{self.max_others_share:.0%} of the CPU), load average up to {load:.2f}"
        )
        if self.ratio is None:
            return f"refused, not published: {self.refused} ({counted})"
        return f"{shown(self.ratio)} (median of {len(self.kept)} of {counted}{self.by_order()})"

    def by_order(self) -> str:
        """The quiet pairs' median ratio of each order, when both are there: with 3 pairs the reference goes
        first in 2, so an effect of the order (the first run of a pair 12% faster in the destinations' pairs of
        2026-12-06: 0.887 and 0.885 against 1.111) moves the median to the majority's side; shown, not judged."""
        orders = {
            first: statistics.median(pair.ratio for pair in self.kept if pair.first == first)
            for first in ("reference", "subject")
            if any(pair.first == first for pair in self.kept)
        }
        if len(orders) < 2:
            return ""
        return (
            f"; by order: reference first {orders['reference']:.2f}, "
            f"subject first {orders['subject']:.2f}"
        )


def _collapsed(pair: Pair, others: list[float], idle: float | None, fraction: float) -> str:
    if idle and pair.reference < fraction * idle:
        return f"reference {pair.reference:,.1f} below {fraction:g} of its idle figure {idle:,.1f}"
    if others and pair.reference < fraction * statistics.median(others):
        return (
            f"reference {pair.reference:,.1f} below {fraction:g} of the other pairs' median "
            f"{statistics.median(others):,.1f}"
        )
    return ""


def judge(figure: PairedFigure) -> PairedFigure:
    """Mark collapsed references, then publish the median of the quiet pairs or refuse the figure.
    A loaded pair's collapse is explained by its load (it is left out anyway); a quiet one's is not."""
    for pair in figure.pairs:
        others = [other.reference for other in figure.kept if other is not pair]
        pair.collapsed = _collapsed(pair, others, figure.idle_reference, figure.collapse_fraction)
    collapsed = [pair for pair in figure.kept if pair.collapsed]
    if collapsed:
        figure.refused = f"pair {collapsed[0].index + 1}: {collapsed[0].collapsed}"
    elif len(figure.kept) < MIN_PAIRS:
        figure.refused = f"{len(figure.kept)} quiet pairs, fewer than {MIN_PAIRS}"
    else:
        figure.ratio = round(statistics.median(pair.ratio for pair in figure.kept), 3)
    return figure


def _idle_path() -> Path:
    return Path(os.environ.get("BENCH_IDLE_REFERENCES", IDLE_REFERENCES))


def idle_reference(name: str) -> float | None:
    """The reference's figure from the last run in which none of its pairs was loaded."""
    try:
        return json.loads(_idle_path().read_text())[name]["value"]
    except (FileNotFoundError, KeyError, ValueError):
        return None


def record_idle_reference(figure: PairedFigure) -> None:
    if figure.ratio is None or figure.left_out:
        return
    try:
        known = json.loads(_idle_path().read_text())
    except (FileNotFoundError, ValueError):
        known = {}
    known[figure.name] = {
        "value": statistics.median(pair.reference for pair in figure.pairs),
        "load_average": max(pair.during.load_average for pair in figure.pairs),
        "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    _idle_path().parent.mkdir(parents=True, exist_ok=True)
    _idle_path().write_text(json.dumps(known, indent=2) + "\n")


def measure_pairs(
    name: str,
    reference: Callable[[int], float],
    subject: Callable[[int], float],
    *,
    pairs: int = MIN_PAIRS,
    max_others_share: float = MAX_OTHERS_SHARE,
    collapse_fraction: float = COLLAPSE_FRACTION,
    groups: CpuGroups | None = None,
    idle: float | None = None,
    before_seconds: float = BEFORE_SECONDS,
    on_pair: Callable[[Pair], None] | None = None,
    settle: Callable[[], dict] | None = None,
) -> PairedFigure:
    """`pairs` (at least MIN_PAIRS) pairs of `reference(index)` and `subject(index)`, each returning a
    rate (higher is better), judged by `judge`. `idle` defaults to the recorded idle figure of `name`.
    `settle`, when given, runs before every run of either side, outside its timing (`bench/settle.py`: what
    one run leaves, the next one starts without), and its record is kept in the pair by side."""
    groups = groups or CpuGroups()
    figure = PairedFigure(
        name=name,
        pairs=[],
        max_others_share=max_others_share,
        collapse_fraction=collapse_fraction,
        idle_reference=idle if idle is not None else idle_reference(name),
    )
    for index in range(max(pairs, MIN_PAIRS)):
        ahead = groups.snapshot()
        time.sleep(before_seconds)
        start = groups.snapshot()
        sides = ("reference", "subject") if index % 2 == 0 else ("subject", "reference")
        values, settled = {}, {}
        for side in sides:
            if settle is not None:
                settled[side] = settle()
            values[side] = (reference if side == "reference" else subject)(index)
        end = groups.snapshot()
        during = window(start, end)
        pair = Pair(
            index=index,
            first=sides[0],
            reference=values["reference"],
            subject=values["subject"],
            ratio=round(values["subject"] / values["reference"], 3) if values["reference"] else 0.0,
            before=window(ahead, start),
            during=during,
            loaded=during.others_share > max_others_share,
            settled=settled,
        )
        figure.pairs.append(pair)
        if on_pair:
            on_pair(pair)
    judge(figure)
    record_idle_reference(figure)
    return figure


def figure_json(
    figure: PairedFigure, runs: dict[tuple[int, str], dict], names: tuple[str, str]
) -> dict:
    """The figure for a section's JSON: `ratio` (None when refused), how it was judged, and each pair
    with the two runs' own records (`runs[(index, side)]`, sides named `names` = (reference, subject))."""
    sides = dict(zip(("reference", "subject"), names, strict=True))
    pairs = []
    for pair in figure.pairs:
        pairs.append(
            {
                **asdict(pair),
                "first": sides[pair.first],
                **{name: runs.get((pair.index, name), {}) for name in names},
            }
        )
    return {
        "ratio": figure.ratio,
        "published": figure.ratio is not None,
        "refused": figure.refused,
        "left_out": figure.left_out,
        "max_others_share": figure.max_others_share,
        "idle_reference": figure.idle_reference,
        "describe": figure.describe(),
        "pairs": pairs,
    }


def median_pair(paired: dict, *, quiet_only: bool = True) -> dict:
    """The pair with the median ratio of a `figure_json`: of its quiet pairs when `quiet_only` and any are
    quiet, else of them all."""
    pairs = paired["pairs"]
    if quiet_only:
        pairs = [pair for pair in pairs if not pair["loaded"]] or pairs
    return sorted(pairs, key=lambda pair: pair["ratio"])[len(pairs) // 2]


def pair_marks(pair: dict) -> str:
    """A pair's marks as the report prints them beside its ratio: " (left out: loaded, collapsed)", or ""."""
    marks = [
        mark
        for mark, on in (
            ("left out: loaded", pair.get("loaded")),
            ("collapsed", pair.get("collapsed")),
        )
        if on
    ]
    return f" ({', '.join(marks)})" if marks else ""


def print_pair(pair: Pair) -> None:
    print(
        f"  pair {pair.index + 1}: {pair.first} first, reference {pair.reference:,.1f}, subject "
        f"{pair.subject:,.1f}, ratio {pair.ratio:.3f}; load {pair.during.load_average:.2f}, others "
        f"{pair.during.others_share:.0%} of the CPU (before {pair.before.others_share:.0%})"
        f"{' LOADED, left out' if pair.loaded else ''}{', ' + pair.collapsed if pair.collapsed else ''}",
        flush=True,
    )


def method_lines() -> list[str]:
    """The reader's account of how a paired figure is taken (docs/benchmarks.md, written by report.py)."""
    return [
        "## How a figure is taken",
        "",
        "Every ratio to a reference measured in the same run (the receiver's capacity, tracing off, a "
        "destination alone, one destination) comes from `bench/pairs.py`: at least "
        f"{MIN_PAIRS} pairs in which the reference and the subject run back to back, the reference first "
        "in even pairs and the subject first in odd ones, so that a machine getting busier or quieter "
        "favours neither side. Each pair records the load average and, from `/proc`, the CPU time of two "
        "groups, the bench's own processes (the bench's process tree and PostgreSQL's backends on its "
        "`<prefix>_*` databases, sampled every 0.2 s so that a backend that exited during the pair, as "
        "pgbench's do, keeps the CPU it was last seen with) and everything else on the machine, over "
        "half a second before the pair (shown, not judged) and over the pair itself.",
        "",
        f"- A pair during which everything else used more than {MAX_OTHERS_SHARE:.0%} of the machine's "
        "CPU (`BENCH_MAX_OTHERS_SHARE`) is marked loaded and left out of the median; each figure says how "
        f"many pairs were left out and the highest load average of its pairs. Fewer than {MIN_PAIRS} "
        "quiet pairs: the figure is refused. Beside it, the median of each order's quiet pairs (shown, not "
        "judged): with 3 pairs the reference goes first in two, so an effect of the order (a pair's first "
        "run faster or slower than its second) moves the median to that order's side. The one-call pairs "
        "(against the receiver's capacity, in e2e and from outside) start every run of either side from the "
        "same state (`bench/settle.py`): the receiver's tables emptied, no autovacuum running or due on "
        "the run's databases (every table a run changed vacuumed and analyzed), then a CHECKPOINT.",
        "- A reference that collapsed, below "
        f"{COLLAPSE_FRACTION:g} (`BENCH_COLLAPSE_FRACTION`) of its own idle figure (recorded in "
        "`var/bench/idle_references.json` by the last run of it with no pair left out; remove the file "
        "to start afresh) or of the other "
        "quiet pairs' median reference, marks the run as broken: the figure reads "
        '"refused, not published" with the reason, and no number.',
        "- A figure with no reference of its own (page times, keys/s, a status event's delay) records the "
        "same shares over its measurement and prints them beside it, marked LOADED above the same share.",
        "- `BENCH_ONLY=<section> make bench` runs one section (e2e, console, reconcile, destinations, "
        "many_destinations, tracing, outside, status_events, console_operators, retention, settlement, oauth2, search, "
        "levers) for a quick check of its wiring; it writes its JSON and log under `var/bench/` and never "
        "this page.",
        "",
    ]


@contextmanager
def watched(groups: CpuGroups | None = None, max_others_share: float = MAX_OTHERS_SHARE):
    """For a figure with no reference of its own (page times, keys/s): the window's load and CPU shares,
    and `loaded` when everything else used more than `max_others_share`; the section prints it beside
    its figures, so that a reader can tell a measurement taken beside other work."""
    groups = groups or CpuGroups()
    record: dict = {}
    start = groups.snapshot()
    try:
        yield record
    finally:
        during = window(start, groups.snapshot())
        record.update(asdict(during), loaded=during.others_share > max_others_share)


def recorded(measure: Callable[..., dict]) -> Callable[..., dict]:
    """`measure` (returning a dict) with the machine during it under "machine" (see `watched`)."""

    @functools.wraps(measure)
    def measured(*args, **kwargs) -> dict:
        with watched() as machine:
            result = measure(*args, **kwargs)
        return {**result, "machine": machine}

    return measured


def watched_line(record: dict) -> str:
    return (
        f"machine during the measurement: load average {record['load_average']:.2f}, the bench "
        f"{record['bench_share']:.0%} and everything else {record['others_share']:.0%} of the CPU"
        f"{' (LOADED: above ' + format(MAX_OTHERS_SHARE, '.0%') + ')' if record['loaded'] else ''}"
    )
