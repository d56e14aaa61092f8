"""docs/benchmarks.md's section on the search by what people know (bench/search_bench.py's JSON)."""

# Issue 39's size: `make bench-search-10m` (bench/run.sh's section measures the largest that fits its budget).
AIM_ROWS = 10_000_000
# What `make bench-search-10m` takes, as measured (the fill and the builds linear in the rows).
AIM_ESTIMATE = (
    "about 12 minutes on 2 idle cores: a fill of 52 s and the build of the words' index "
    "(`handoff_search_words_idx`, a plpgsql function a row) of 570 s (2026-12-06), plus the migrations "
    "and the pages; about 33 minutes at loads of 14 to 24"
)


def section(search: dict) -> list[str]:
    pages = search["pages"]
    rows = [f"| {name} | {p['median_ms']:.1f} | {p['p95_ms']:.1f} |" for name, p in pages.items()]
    verdict = "met" if search["met"] else "not met"
    aim = search["rows"] >= AIM_ROWS
    return [
        f"## Search by client name at {search['rows']:,} handoffs",
        "",
        "The console's list page searching a client's name beside the plain list page, one operator, "
        f"{search['repeat']} requests each, in-process. The outbox is filled by one INSERT … SELECT over "
        "generate_series per core, side by side, with its secondary indexes dropped "
        f"({search['fill_seconds']:.0f} s, {search['rows'] / search['fill_seconds']:,.0f} rows/s), "
        "then every index (the GIN index of the words' starts too) is rebuilt by as many "
        f"connections, longest first, and the table ANALYZEd ({search['index_seconds']:.0f} s; "
        "`bench/harness.py` `bulk_fill_split`). "
        + (
            "This is the issue's aim, run apart by `make bench-search-10m`."
            if aim
            else "The issue's aim is 10,000,000 handoffs, which does not fit `make bench`'s 20 minutes "
            f"beside the other sections: `make bench-search-10m` runs it apart ({AIM_ESTIMATE}), and "
            "the next whole run carries its figure here."
        ),
        "",
        "```sh",
        search["command"],
        "```",
        "",
        "| page | median ms | p95 ms |",
        "| --- | --- | --- |",
        *rows,
        "",
        f"Search / list: medians {search['ratio']:.2f}x"
        + (f", p95 {search['ratio_p95']:.2f}x" if "ratio_p95" in search else "")
        + f", aim within {search['aim']:g}x: {verdict}. "
        f"{search['machine']}"
        + (f" Measured {search['measured_at']}." if "measured_at" in search else ""),
        "",
    ]
