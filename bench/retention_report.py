"""docs/benchmarks.md's lines for bench/retention_bench.py: its row in the aims table and its section (four
dispatchers' rate with retention running against without, and retention's rate beside it)."""

from bench.pairs import pair_marks

# Measured apart from the bench's pairs, which a shared machine leaves out (bench/pairs.py).
WHERE_A_ROW_GOES = [
    "Where a row's CPU goes (2026-12-07, 10 batches of 1,000 from this fill in one process, CPU from "
    "`/proc`, the code before and after run in turn twice at a load of 14-20 from other work): the "
    "retention process 0.073-0.075 ms a row before, 0.024-0.026 after; its backend 0.082-0.087 before, "
    "0.078-0.082 after (the INSERT … SELECT that builds the history documents, and the four deletes): "
    "0.16 ms a row in all before, 0.105 after. A profile (cProfile, 5 batches) put 2.8 s of the process's"
    " 3.0 in statements taking a batch's thousand ids or keys as a placeholder each (Django preparing "
    "each value, psycopg splitting each placeholder: the hold check's two, the metrics' carry-over's "
    "four) and in reading all 22 kept columns of rows deleted right after. Those statements now take them"
    " as one array (`lib.databases.ValuesIn`), and the pick reads the id, the key and the last change. "
    "The wait for delivery, measured with 2,196 handoffs due and no dispatcher (a load of 15): "
    "`archive_settled` moved 125 rows/s before it, 50 after; while it waits it looks at the backlog twice "
    "a second, at 0.8 ms of CPU a look (the process 0.25, its backend 0.57; 2.4 when the ORM compiled it "
    "each time).",
    "",
]


def _figure(report: dict) -> str:
    """bench/pairs.py's judgement when the run has one ("refused, not published: ..." instead of a number)."""
    return report.get("describe") or f"{report['median_ratio']:.2f}"


def _cpu(ms: float | None) -> str:
    """A CPU figure of a run; a report from before the bench read it has none."""
    return f"{ms:.3f}" if ms else "not measured"


def _by_cpu(report: dict) -> list[str]:
    """The figure by CPU per delivered handoff, when the run measured it."""
    if not report.get("cpu_ratio"):
        return []
    return [
        "By CPU per delivered handoff (the dispatchers, the receiver with its backends, the source "
        "database's backends and the retention process, from `/proc`; each pair's without over with, their "
        f"median): {report['cpu_ratio']:.2f}, the ratio the rates reach when the cores are the limit and "
        "nothing else runs on them.",
        "",
    ]


def _cores(cores: float | None) -> str:
    """The receiver's cores over a run's span; a report from before the bench read them has none."""
    return f"{cores:.2f}" if cores else "not measured"


def _receiver(report: dict) -> list[str]:
    """The receiver's cores over the runs' spans, and what they make of the CPU per handoff beside them."""
    cores = sorted(
        run["receiver_cores"]
        for pair in report["pairs"]
        for run in (pair["without"], pair["with"])
        if run.get("receiver_cores")
    )
    if not cores:
        return []
    saturated = cores[0] >= 0.9
    return [
        f"The receiver's processes (gunicorn's) took {cores[0]:.2f}-{cores[-1]:.2f} of a core over the runs' "
        "spans"
        + (
            ", every run: it is the saturated stage in this section, so its CPU is its cores times the run's "
            "length and the CPU per handoff above follows the rate, not the work a handoff costs; read the "
            "rates' ratio, not the CPU's, here."
            if saturated
            else "; the CPU per handoff above counts its share."
        ),
        "",
    ]


def _alone(report: dict) -> str:
    """Retention's own pace with nothing delivered beside it, and what it means a day, when measured."""
    rate = report.get("retention_alone_rows_per_second")
    if not rate:
        return ""
    return f", {rate:,.0f} rows/s alone ({rate * 86400 / 1e6:,.0f} million a day)"


def _yielding(report: dict) -> str:
    """How retention yields to delivery, from the settings the run used (a report from before has none)."""
    if not report.get("yield_backlog"):
        return ""
    return (
        f"While at least {report['yield_backlog']:,.0f} handoffs are due (the dispatchers are behind: here, "
        f"most of a run) retention begins no batch, for at most {report['max_yield_seconds']:g} s a batch "
        f"(`HANDOFF_RETENTION_YIELD_BACKLOG`, `HANDOFF_RETENTION_MAX_YIELD_SECONDS`): beside a delivery that "
        f"stays behind it still moves a batch of 1,000 at least every {report['max_yield_seconds']:g} s and "
        "its rest (its rate in the runs above); "
        "once the dispatchers keep up it goes at its own pace, batches filling at most "
        f"{report['duty_cycle']:g} of the wall clock."
    )


def aims_row(report: dict) -> str:
    return (
        f"| delivery with retention running / without (4 dispatchers, {report['rows']:,} settled handoffs): "
        f"≥ {report['aim']} | {_figure(report)}; retention {report['retention_rows_per_second']:,.0f} "
        f"rows/s beside dispatch {report['dispatch_per_second_with']:,.0f}/s{_alone(report)} | "
        f"{'met' if report['met'] else 'missed'} |"
    )


def section(report: dict, command: str) -> list[str]:
    lines = [
        f"## Retention beside delivery ({report['rows']:,} settled handoffs)",
        "",
        f"{report['dispatchers']} `manage.py dispatch` processes deliver {report['handoffs']:,} new handoffs to "
        "the bundled receiver with nothing else running, and again with `manage.py archive_settled` moving the "
        "settled ones (each with an attempt and an event, settled 40 days ago) to the archive in batches of "
        "1,000; pairs back to back in alternating order. `archive_settled` is in its batches (its first one "
        "committed) before the handoffs are queued: its start, Django's (about 1.2 s of CPU, more than the rows "
        "a run moves cost), is not retention beside delivery. Rates over the span of the run's `delivered_at`; "
        "retention's over the same span, with its CPU per row moved (its process and its backend, from /proc).",
        "",
        "```sh",
        command or report["command"],
        "```",
        "",
        "| pair | without: handoffs/s | with: handoffs/s | with / without | retention rows/s | "
        "retention CPU ms/row | CPU ms a handoff, without / with | receiver cores, without / with |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, pair in enumerate(report["pairs"], 1):
        lines.append(
            f"| {n} | {pair['without']['per_second']:,.0f} | {pair['with']['per_second']:,.0f} | "
            f"{pair['ratio']:.2f}{pair_marks(pair)} | {pair['with']['retention_rows_per_second']:,.0f} | "
            f"{_cpu(pair['with'].get('retention_cpu_ms_per_row'))} | "
            f"{_cpu(pair['without'].get('cpu_ms_per_handoff'))} / "
            f"{_cpu(pair['with'].get('cpu_ms_per_handoff'))} | "
            f"{_cores(pair['without'].get('receiver_cores'))} / "
            f"{_cores(pair['with'].get('receiver_cores'))} |"
        )
    lines += [
        "",
        f"With / without: {_figure(report)} (aim ≥ {report['aim']}: "
        f"{'met' if report['met'] else 'missed'}); retention {report['retention_rows_per_second']:,.0f} rows/s "
        f"beside a dispatch rate of {report['dispatch_per_second_with']:,.0f} handoffs/s in the same runs, at "
        f"{_cpu(report.get('retention_cpu_ms_per_row'))} ms of CPU a row.",
        "",
        *_by_cpu(report),
        *_receiver(report),
        *_pace(report),
        *WHERE_A_ROW_GOES,
    ]
    return lines


def _pace(report: dict) -> list[str]:
    """Retention's pace beside delivery and alone, and whether it keeps up with a day's approvals."""
    yielding = _yielding(report)
    rate = report.get("retention_alone_rows_per_second")
    if not yielding and not rate:
        return []
    alone = ""
    if rate:
        alone = (
            f" Alone (nothing delivered beside it, after the pairs) it moved {rate:,.0f} rows/s at "
            f"{_cpu(report.get('retention_alone_cpu_ms_per_row'))} ms of CPU a row: "
            f"{rate * 86400 / 1e6:,.1f} million a day, {rate / report['dispatch_per_second_without']:.2f} of "
            "the rate the dispatchers deliver at flat out here: it keeps up with any day whose approvals "
            f"average below {rate:,.0f}/s, and catches up in the hours the dispatchers are not behind."
        )
    return [f"{yielding}{alone}".strip(), ""]
