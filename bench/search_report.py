"""docs/benchmarks.md's section on the search by what people know (bench/search_bench.py's JSON)."""


def section(search: dict) -> list[str]:
    pages = search["pages"]
    rows = [f"| {name} | {p['median_ms']:.1f} | {p['p95_ms']:.1f} |" for name, p in pages.items()]
    verdict = "met" if search["met"] else "not met"
    return [
        f"## Search by client name at {search['rows']:,} handoffs",
        "",
        "The console's list page searching a client's name beside the plain list page, one operator, "
        f"{search['repeat']} requests each, in-process. The outbox is filled in one INSERT … SELECT over "
        f"generate_series ({search['fill_seconds']:.0f} s), the trigram index built once after the fill "
        f"({search['index_seconds']:.0f} s). The issue's aim is 10,000,000 handoffs; a fill and index of that "
        "size does not fit `make bench`'s 20 minutes beside the other sections, so the run measures the "
        "largest that does (`BENCH_SEARCH_ROWS=10000000` for the aim's).",
        "",
        "```sh",
        search["command"],
        "```",
        "",
        "| page | median ms | p95 ms |",
        "| --- | --- | --- |",
        *rows,
        "",
        f"Search / list (medians): {search['ratio']:.2f}x, aim within {search['aim']:g}x: {verdict}. "
        f"{search['machine']}",
        "",
    ]
