"""docs/benchmarks.md's lines for bench/console_operators_bench.py: its row in the aims table and its section
(every page at one operator, the reference of the same run, and at many at once)."""


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


def section(report: dict, command: str) -> list[str]:
    aim = report["aim"]
    lines = [
        f"## Console pages with {report['operators']} operators at once "
        f"({report['rows']:,} handoffs, gunicorn as `make run` serves it)",
        "",
        f"Each operator signed in with a session of its own, {report['rounds']} rounds of the pages below in a "
        "thread of its own (the order shifted per operator); the reference is one operator alone in the same "
        "run. Times are the client's: request sent to last byte read over a local socket, queueing in the "
        f"server included. Load average {report['load_average']} on {report['cores']} cores at the end; the "
        f"fill took {report['fill_seconds']} s.",
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
    return [*lines, ""]


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
