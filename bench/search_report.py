"""docs/benchmarks.md's section on the search by what people know (bench/search_bench.py's JSON)."""

# Issue 39's size, which `make bench` measures on databases kept between runs (bench/search_bench.py --keep).
AIM_ROWS = 10_000_000
# What a cold run (no kept databases, or made otherwise) takes at the aim's size, as measured.
COLD_ESTIMATE = (
    "about 12 minutes on 2 idle cores: a fill of 52 s and the build of the words' index "
    "(`handoff_search_words_idx`, a plpgsql function a row) of 570 s beside the other 21 indexes' 125 s "
    "(2026-12-06), plus the migrations and the pages"
)
# Why the index is not made cheaper for the bench's sake (measured 2026-12-06 on 500,000 rows of the bench's
# text, maintenance_work_mem 1GB, CPU of the building backend): the build costs about 1 µs an entry.
CHEAPER_INDEX = (
    "An index of fewer starts (3, 6, 12 and 24 characters of each word instead of every length up to 24, a "
    "typed word looked up by its longest indexed start and compared whole after) was measured on 500,000 "
    "rows of this text: 15 entries a row instead of 51, a build of 11.2 s of CPU instead of 24.1 s (3, 4, "
    "6, 8, 12, 16 and 24: 24 entries, 14.6 s). That is still about 4 minutes of one core at 10,000,000, over "
    "the section's share of the budget, and a typed word between two indexed lengths is looked up by fewer "
    "characters (a 5-digit number by its first 4 reads about 1,000 times the rows at 10,000,000): the "
    "databases are kept instead"
)


def _filled_by(search: dict) -> str:
    if not search.get("kept"):
        return "by this run. "
    if search.get("reused"):
        return (
            f"by the run of {search['built_at']}, whose databases this one reused after migrating them "
            f"forward ({search['prepare_seconds']:.0f} s): kept (`bench/search_bench.py --keep`), they are "
            "only measured while the fill, the installed packages and every migration file applied to them "
            f"are as they were, and filled afresh otherwise ({COLD_ESTIMATE}). {CHEAPER_INDEX}. "
        )
    return (
        f"by this run ({search['prepare_seconds']:.0f} s in all, cold), which kept the databases: the next "
        "run reuses them, migrated forward, while the fill, the installed packages and every migration file "
        "applied to them are as they were (`bench/search_bench.py --keep`), and only measures. "
        f"{CHEAPER_INDEX}. "
    )


def _cpu(search: dict) -> str:
    if "ratio_cpu" not in search:
        return ""
    plain, found = (page["cpu_ms"] for page in search["pages"].values())
    return (
        "CPU a request, the bench's process and its PostgreSQL backend, the pages taking turns (what the "
        f"machine's load does not move): list {plain:.1f} ms, search {found:.1f} ms, "
        f"{search['ratio_cpu']:.2f}x. "
    )


def aims_row(search: dict) -> str:
    """The aims table's row: issue 39's done-when."""
    verdict = "met" if search["met"] and search["rows"] >= AIM_ROWS else "missed"
    return (
        f"| search by client name at {AIM_ROWS:,} handoffs within {search['aim']:g}x of the list page "
        f"(median and p95, same run) | {search['rows']:,} handoffs: median {search['ratio']:.2f}x, "
        f"p95 {search['ratio_p95']:.2f}x | {verdict} |"
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
        f"{search['repeat']} requests each, in-process. The outbox was filled by one INSERT … SELECT over "
        "generate_series per core, side by side, with its secondary indexes dropped "
        f"({search['fill_seconds']:.0f} s, {search['rows'] / search['fill_seconds']:,.0f} rows/s), "
        "then every index (the GIN index of the words' starts too) was rebuilt by as many connections, "
        f"longest first, and the table ANALYZEd ({search['index_seconds']:.0f} s; `bench/harness.py` "
        "`bulk_fill_split`"
        + (f"; at a load of {search['built_load']} when done" if search.get("built_load") else "")
        + "), "
        + (
            _filled_by(search)
            + (
                ""
                if aim
                else f"The issue's aim is {AIM_ROWS:,} handoffs, which `make bench` runs "
                "(BENCH_SEARCH_ROWS chose this size)."
            )
        ).rstrip(),
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
        + _cpu(search)
        + f"{search['machine']}"
        + (f" Measured {search['measured_at']}." if "measured_at" in search else ""),
        "",
    ]
