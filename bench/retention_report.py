"""docs/benchmarks.md's lines for bench/retention_bench.py: its row in the aims table and its section (four
dispatchers' rate with retention running against without, and retention's rate beside it)."""

from bench.pairs import pair_marks


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


def aims_row(report: dict) -> str:
    return (
        f"| delivery with retention running / without (4 dispatchers, {report['rows']:,} settled handoffs): "
        f"≥ {report['aim']} | {_figure(report)}; retention {report['retention_rows_per_second']:,.0f} "
        f"rows/s beside dispatch {report['dispatch_per_second_with']:,.0f}/s | "
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
        "retention CPU ms/row | CPU ms a handoff, without / with |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, pair in enumerate(report["pairs"], 1):
        lines.append(
            f"| {n} | {pair['without']['per_second']:,.0f} | {pair['with']['per_second']:,.0f} | "
            f"{pair['ratio']:.2f}{pair_marks(pair)} | {pair['with']['retention_rows_per_second']:,.0f} | "
            f"{_cpu(pair['with'].get('retention_cpu_ms_per_row'))} | "
            f"{_cpu(pair['without'].get('cpu_ms_per_handoff'))} / "
            f"{_cpu(pair['with'].get('cpu_ms_per_handoff'))} |"
        )
    lines += [
        "",
        f"With / without: {_figure(report)} (aim ≥ {report['aim']}: "
        f"{'met' if report['met'] else 'missed'}); retention {report['retention_rows_per_second']:,.0f} rows/s "
        f"beside a dispatch rate of {report['dispatch_per_second_with']:,.0f} handoffs/s in the same runs, at "
        f"{_cpu(report.get('retention_cpu_ms_per_row'))} ms of CPU a row.",
        "",
        *_by_cpu(report),
    ]
    return lines
