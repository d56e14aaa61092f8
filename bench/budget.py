"""`make bench`'s time budget: each section's estimated share of the 20 minutes on 2 idle cores, beside the
seconds it took in this run (bench/run.sh writes them to var/bench/section_seconds.txt). The report prints
both in "How a figure is taken", so a run that overran says which section did."""

from pathlib import Path

BUDGET_MINUTES = 20

# (section, estimated seconds on 2 idle cores, what the estimate rests on)
BUDGET = (
    (
        "e2e",
        432,
        "432 s in the idle run of 2026-12-07 20:27 (3a38e3c). Before: 494 s in the run of 2026-12-07 17:31 (this "
        "estimate was 415 s), less 6 s since: the receiver's capacity at the start measured 2 × 5 s (was 8 s, as "
        "the one-call pairs' 5 s captures). Before: 549 s in the whole run of 2026-12-06 13:47, of which about "
        "150 s were 31 starts of dispatcher sets (about 2 s of CPU a process, 9 s for 8 on 2 cores) and 30 s two "
        "refills of 1,000,000 rows; since, each figure's dispatchers start once for all its runs "
        "(`Bench.kept_running`: 13 starts), growth fills each table once in an outbox of its own, pgbench runs 3 "
        "s a pair (was 5), latency runs 10 s (was 15), and the alternative's restart waits 15 s of quiet after "
        "its first delivery (was 30 s after the restart); since 2026-12-07 the three latency runs are paired with "
        "a minimal dispatcher's (`latency_pairs`): 3 runs of 10 s more, and each side's dispatchers started for "
        "its run, about 45 s",
    ),
    (
        "console",
        12,
        "28 s in the idle run of 2026-12-07 20:27 (fill 19.6 s), less the fill: the run measures on a copy of a "
        "fill kept between runs (`--keep`, bench/kept.py); the process that copies it took 0.094, 0.098 and 0.146 "
        "of one that fills (3 interleaved pairs, 2026-12-07 23:05, loads 5-8; the first fill also migrated the "
        "templates), so 28 - 19.6 x (1 - 0.146) = 11.3 s, a fill again (about 20 s more) when the kept one is "
        "stale or over 12 hours old (`make bench-console-kept` makes it ahead). "
        "Before: 28 s. Before: 51 s in the run of 2026-12-07 17:31 "
        "(fill 38 s), 11 pages of 31 requests; since, the fill's 1,000,000 events go in without a foreign-key "
        "check each (`harness.bulk_fill`: a history fill 0.65 of its time in 3 interleaved pairs)",
    ),
    (
        "reconcile",
        97,
        "10,000,000 keys in_process and 1,000,000 over http, each on databases kept between runs (`--keep`, `make "
        "bench-reconcile-10m`): their checks (an exact count of each side, about 2 s at 10,000,000) and two "
        "starts, about 5 s; the in_process pass about 79 s: the 1,000,000 keys' 7.0 s in the idle run of "
        "2026-12-07 20:27 times 10 over 0.889, the lower of two measured ratios of the rate at 10,000,000 keys to "
        "the rate at 1,000,000 (runs of 1,000,000, 10,000,000, then 1,000,000 keys back to back, at loads of "
        "10-25, 2026-12-07: http 18,664, 16,171 and 17,727 keys/s, 0.889; in_process 27,830, 26,272 and 22,557 "
        "keys/s, 1.04; RSS flat from the first tenth to the last in both, 97 and 89 MB); the http pass 12.4 s as "
        "in that idle run. A cold run fills them first: about 150 s more idle (425-451 s at loads of 11-17). "
        "Before: 37 s in that run, with a fill of 1,000,000 keys of its own (17 s) and both passes at 1,000,000; "
        "http at 10,000,000 would be about 140 s, 60 s more than fit",
    ),
    (
        "destinations",
        52,
        "52 s in the idle run of 2026-12-07 20:27. Before: 3 pairs, 63 s in the run of 2026-12-07 17:31, 73 s on "
        "2026-12-06 13:47",
    ),
    (
        "many_destinations",
        59,
        "59 s in the idle run of 2026-12-07 20:27. Before: 3 pairs of 2,000 handoffs, 69 s in the run of "
        "2026-12-07 17:31, 68 s on 2026-12-06 13:47",
    ),
    (
        "tracing",
        65,
        "65 s in the idle run of 2026-12-07 20:27. Before: 56 s in the run of 2026-12-07 17:31: 5 pairs of 800 "
        "handoffs: 10 runs of a dispatcher's start (about 2.5 s) and 3 s of delivery at 250/s (3 pairs of 2,000 "
        "took 60 s on 2026-12-06 19:43)",
    ),
    (
        "outside",
        58,
        "58 s in the idle run of 2026-12-07 20:27. Before: 44 s in the run of 2026-12-07 17:31: 4 dispatchers "
        "started once, then 3 pairs of 5 s of plain clients and 2,500 handoffs (about 7 s at 350/s)",
    ),
    (
        "status_events",
        25,
        "25 s in the idle run of 2026-12-07 20:27. Before: 400 changes at 20/s: 22 s in the run of 2026-12-07 "
        "17:31",
    ),
    (
        "console_operators",
        70,
        "94 s in the idle run of 2026-12-07 20:27 (fill 29 s), less the fill: the run measures on a copy of a "
        "fill kept between runs (`--keep`, bench/kept.py); the process that copies it took 0.158, 0.080 and 0.141 "
        "of one that fills (3 interleaved pairs, 2026-12-07 23:07, loads 2-4), so 94 - 29 x (1 - 0.158) = 69.6 s, "
        "a fill again (about 30 s more) when the kept one is stale or over 12 hours old. "
        "Before: 94 s. Before: 88 s in the run of 2026-12-07 17:31: a "
        "1,000,000-row fill of 31 s (10,000,000 took 272 s alone); since, its events and attempts go in without a "
        "foreign-key check each (`harness.bulk_fill`), about 11 s less",
    ),
    (
        "retention",
        120,
        "120 s in the idle run of 2026-12-07 20:27 (fill 24 s). Before: 103 s in the run of 2026-12-07 17:31, and "
        "since, the fill's history without a foreign-key check each (`harness.bulk_fill`: the fill 0.65 of its 24 "
        "s, median of 3 interleaved pairs); 113 s on 2026-12-07 05:49: a 1,000,000-row fill with its history, 4 "
        "dispatchers started once, 3 pairs of 3,000 handoffs at 280-370/s (about 60 s), each run's "
        "`archive_settled` start and clearing, and retention alone for 10 s (103 s on 2026-12-06 13:47, when each "
        "of the 6 runs started its 4 dispatchers)",
    ),
    (
        "settlement",
        104,
        "104 s in the idle run of 2026-12-07 20:27. Before: 113 s in the run of 2026-12-07 17:31: 2 kinds of "
        "lookup × 3 pairs at 4 dispatchers (no longer 1 and 2 as well) of a ceiling (lookups 2 s batched, 4 s one "
        "key a request; the writes alone) and a run of 20,000 outcomes batched, 4,000 one key a request; 182 s on "
        "2026-12-07 05:49 with 3 dispatcher counts and 2,000 outcomes",
    ),
    (
        "oauth2",
        15,
        "15 s in the idle run of 2026-12-07 20:27. Before: 18 s in the run of 2026-12-07 17:31, 19 s on "
        "2026-12-06 13:47",
    ),
    (
        "search",
        20,
        "5 s in the idle run of 2026-12-07 20:27 (kept databases, no migration added since their fill); the "
        "estimate keeps room for a migration added since, applied to the 10,000,000 rows. Before: 10,000,000 "
        "handoffs on the databases kept by an earlier run (`search_bench.py --keep`): `migrate` on both (4 s), 2 "
        "pages of 31 requests, then 30 of each taking turns for their CPU; 23 s at a load of 15 (2026-12-06 "
        "19:15; 11 s without the CPU's turns at 16.6). A cold run (the first on a machine, or after a change to "
        "the fill, a package or a migration file applied to them) fills and indexes them first: about 12 minutes "
        "more on 2 idle cores (the words' index 570 s of one core; 582 s of CPU, 2,208 s of wall at loads of 16 "
        "to 24 on 2026-12-06), or ahead by `make bench-search-10m`",
    ),
)


def section_seconds(path: str | None) -> dict[str, tuple[int, str]]:
    """The seconds (and the load average at its end) each section took, from run.sh's file."""
    if not path or not Path(path).exists():
        return {}
    taken = {}
    for line in Path(path).read_text().splitlines():
        name, seconds, *load = line.split()
        taken[name] = (int(seconds), load[0] if load else "")
    return taken


def budget_lines(path: str | None) -> list[str]:
    taken = section_seconds(path)
    total = sum(seconds for _, seconds, _ in BUDGET)
    lines = [
        f"Time budget: `make bench` is sized to stay under {BUDGET_MINUTES} minutes on 2 idle cores "
        f"(estimated {total / 60:.0f} min); each section's estimate, what it rests on, and the seconds it "
        "took in this run (with the load average at its end):",
        "",
        "| section | estimate | this run | the estimate rests on |",
        "| --- | --- | --- | --- |",
    ]
    for name, seconds, basis in BUDGET:
        took = taken.get(name)
        shown = f"{took[0]} s (load {took[1]})" if took else "not run"
        lines.append(f"| {name} | {seconds} s | {shown} | {basis} |")
    if taken:
        lines.append(f"| all | {total} s | {sum(s for s, _ in taken.values())} s | |")
    lines += [
        "",
        "Every section starts on copies of one pair of migrated databases (`bench/schema_template.py`), "
        "migrated by the first section of a run and again only when a migration or an installed package "
        "changed: migrating both databases took about 22 s of CPU, once per section before (2026-12-06).",
    ]
    return [*lines, ""]
