"""docs/benchmarks.md's lines for bench/console_operators_bench.py: its row in the aims table and its section
(every page at one operator, the reference of the same run, and at many at once, beside this machine's
ceiling for many at once: the least a console page must do, asked as often by the same operators)."""

import statistics

from bench.pairs import median_pair, pair_marks


def met(figure: dict, aim: dict) -> bool:
    return figure["median_ms"] < aim["median_ms"] and figure["p95_ms"] < aim["p95_ms"]


def aims_row(report: dict) -> str:
    """The aim judged twice: operators opening pages back to back (every request queued behind the others'
    on 2 cores), and operators who read a page before opening the next, as people do (`--also-think-ms`)."""
    aim = report["aim"]
    cells = [_judged(report["concurrent"], aim, "back to back")]
    thinking = report.get("concurrent_thinking")
    if thinking:
        cells.append(
            _judged(thinking["pages"], aim, f"reading ~{thinking['think_ms']:,} ms per page")
        )
    ceiling = ceiling_text(report)
    if ceiling:
        cells[0] = (f"{cells[0][0]}; {ceiling}", cells[0][1] + ceiling_verdict(report))
    verdicts = [verdict for _text, verdict in cells]
    return (
        f"| console at {report['rows']:,} handoffs with {report['operators']} operators at once: every page "
        f"median < {aim['median_ms']:g} ms, p95 < {aim['p95_ms']:g} ms | "
        + "; ".join(text for text, _verdict in cells)
        + " | "
        + "; ".join(verdicts)
        + " |"
    )


def _judged(pages: dict, aim: dict, how: str) -> tuple[str, str]:
    missed = [name for name, figure in pages.items() if not met(figure, aim)]
    worst_median = max(figure["median_ms"] for figure in pages.values())
    worst_p95 = max(figure["p95_ms"] for figure in pages.values())
    text = (
        f"{how}: worst median {worst_median:,.1f} ms, worst p95 {worst_p95:,.1f} ms, "
        f"{len(pages) - len(missed)} of {len(pages)} pages within both"
    )
    verdict = f"{how}: met" if not missed else f"{how}: missed ({', '.join(missed)})"
    return text, verdict


def over_ceiling(ceiling: dict) -> float | None:
    """The product's worst page median over the ceiling's median: the median of the quiet pairs' (a pair's
    own ratio is the ceiling's rate over the product's, rounded: taken from the medians instead), None when
    the paired figure was refused."""
    if ceiling["ratio"] is None:
        return None
    kept = [pair for pair in ceiling["pairs"] if not pair["loaded"]]
    return statistics.median(over_in(pair) for pair in kept)


def over_in(pair: dict) -> float:
    return pair["product"]["worst_median_ms"] / pair["ceiling"]["worst_median_ms"]


def ceiling_text(report: dict) -> str:
    """This machine's ceiling for the operators back to back (`bench/console_ceiling.py`, paired with the
    product's rounds in the same run) and the product's worst median over it; a refused figure gives its
    reason and no ratio."""
    ceiling = report.get("ceiling")
    if not ceiling or not ceiling.get("pairs"):
        return ""
    pair = median_pair(ceiling)
    head = (
        f"this machine's ceiling, the same {report['operators']} operators back to back on the least a console "
        "page must do (`bench/console_ceiling.py`: session and user read, one indexed query, a small "
        "template; same gunicorn; asked in the pages' places, its worst median of them as the product's): "
        f"{pair['ceiling']['worst_median_ms']:,.1f} ms at "
        f"{pair['ceiling']['pages_per_second']:,.0f} pages/s against the product's worst median "
        f"{pair['product']['worst_median_ms']:,.1f} ms at {pair['product']['pages_per_second']:,.0f} pages/s "
        "in the median pair; "
    )
    over = over_ceiling(ceiling)
    if over is None:
        return head + f"the product's worst median over the ceiling's {ceiling['describe']}"
    kept = sum(not pair["loaded"] for pair in ceiling["pairs"])
    return head + (
        f"the product's worst median over the ceiling's {over:.2f} (median of {kept} of "
        f"{len(ceiling['pairs'])} pairs' ratios; as a rate, {ceiling['describe']})"
    )


def ceiling_verdict(report: dict) -> str:
    """Whether the aim is within this machine's reach back to back: the ceiling's own median against it."""
    pair = median_pair(report["ceiling"])
    median = pair["ceiling"]["worst_median_ms"]
    if median < report["aim"]["median_ms"]:
        return f" (the ceiling's worst median {median:,.1f} ms is within the aim)"
    return f" (out of reach on this machine: the ceiling's own worst median {median:,.1f} ms)"


def ceiling_lines(report: dict) -> list[str]:
    """The section's table of the pairs: each side's worst median, p95 and pages a second."""
    ceiling = report.get("ceiling")
    if not ceiling or not ceiling.get("pairs"):
        return []
    lines = [
        "Each pair of rounds above ran back to back with as many of the ceiling's (the order alternating); "
        "the ceiling's page is served after the product's URLconf, unchanged. "
        + ceiling_text(report)[0].upper()
        + ceiling_text(report)[1:]
        + ".",
        "",
        "| pair | first | ceiling worst median / p95, pages/s | product worst median / p95, pages/s | "
        "product over ceiling |",
        "| --- | --- | --- | --- | --- |",
    ]
    for pair in ceiling["pairs"]:
        one, two = pair["ceiling"], pair["product"]
        lines.append(
            f"| {pair['index'] + 1} | {pair['first']} | {one['worst_median_ms']:,.1f} / "
            f"{one['worst_p95_ms']:,.1f} ms, {one['pages_per_second']:,.0f} | {two['worst_median_ms']:,.1f} / "
            f"{two['worst_p95_ms']:,.1f} ms, {two['pages_per_second']:,.0f} | "
            f"{over_in(pair):.2f}{pair_marks(pair)} |"
        )
    return [*lines, ""]


def section(report: dict, command: str) -> list[str]:
    aim = report["aim"]
    lines = [
        f"## Console pages with {report['operators']} operators at once "
        f"({report['rows']:,} handoffs, gunicorn as `make run` serves it)",
        "",
        "Each operator signed in with a session of its own, "
        + (
            f"{report['pair_rounds']} rounds of the pages below in each of {report['pairs']} pairs (pooled)"
            if report.get("pairs")
            else f"{report['rounds']} rounds of the pages below"
        )
        + " in a thread of its own (the order shifted per operator); the reference is one operator alone "
        f"({report['rounds'] * 2} rounds) in the same "
        "run. Times are the client's: request sent to last byte read over a local socket, queueing in the "
        f"server included. Load average {report['load_average']} on {report['cores']} cores at the end; "
        + (
            f"measured on a copy of databases kept between runs (filled {report['kept']['built_at']} in "
            f"{report['fill_seconds']} s)."
            if report.get("kept")
            else f"the fill took {report['fill_seconds']} s."
        ),
        "",
        "```sh",
        command,
        "```",
        "",
        f"| page | 1 operator median / p95 | {report['operators']} operators median / p95 | aim |"
        + thinking_header(report),
        "| --- | --- | --- | --- |" + (" --- |" if "concurrent_thinking" in report else ""),
    ]
    for name, many in report["concurrent"].items():
        one = report["alone"][name]
        lines.append(
            f"| {name} | {one['median_ms']:,.1f} / {one['p95_ms']:,.1f} ms | "
            f"{many['median_ms']:,.1f} / {many['p95_ms']:,.1f} ms | "
            f"{'met' if met(many, aim) else 'missed'} |" + thinking_cell(report, name)
        )
    return [*lines, "", *ceiling_lines(report)]


def thinking_header(report: dict) -> str:
    """The column of the run where each operator reads a page before opening the next (`--also-think-ms`)."""
    thinking = report.get("concurrent_thinking")
    if not thinking:
        return ""
    return f" {report['operators']} operators reading ~{thinking['think_ms']:,} ms per page: median / p95 |"


def thinking_cell(report: dict, name: str) -> str:
    thinking = report.get("concurrent_thinking")
    if not thinking:
        return ""
    figure = thinking["pages"][name]
    mark = "met" if met(figure, report["aim"]) else "missed"
    return f" {figure['median_ms']:,.1f} / {figure['p95_ms']:,.1f} ms ({mark}) |"
