"""docs/benchmarks.md's lines for bench/outside_check.py: its row in the aims table and its section (one call
per handoff with the dispatchers driven from outside, against the receiver's capacity, with the CPU a handoff
cost each side)."""

from bench.pairs import pair_marks


def aims_row(report: dict) -> str:
    return (
        f"| one call per handoff driven from outside (`manage.py dispatch` × {report['dispatchers']} with the "
        f"product's defaults, handoffs inserted by SQL) ≥ {report['aim']} of the receiver's capacity | "
        f"{report['describe']} | {'met' if report['met'] else 'missed'} |"
    )


def placement(run: dict) -> str:
    """How a run's connections fell on the receiver's workers, `3+1` (three on one, one on another); "—" for a
    run that did not note it."""
    return "+".join(str(count) for count in run.get("receiver_connections") or []) or "—"


def databases(capacity: dict, outside: dict) -> str:
    """PostgreSQL's CPU a handoff on the source database (the dispatchers' claims and outcomes, the inserts
    and the check's polls) and on the receiver's, and the receiver's a create; "—" for runs from before it was
    noted (2026-12-07 10:00)."""
    if "source_database_cpu_ms_per_handoff" not in outside:
        return "—"
    return (
        f"{outside['source_database_cpu_ms_per_handoff']:.2f}, "
        f"{outside['receiver_database_cpu_ms_per_handoff']:.2f}; "
        f"{capacity['receiver_database_cpu_ms_per_create']:.2f}"
    )


def alike_line(pairs: list[dict]) -> str:
    """The pairs whose two sides' connections fell alike on the receiver's workers, with their ratios: the
    comparison the placement does not tilt."""
    alike = [
        (n, pair)
        for n, pair in enumerate(pairs, 1)
        if pair["capacity"].get("receiver_connections")
        and pair["capacity"].get("receiver_connections")
        == pair["one_call"].get("receiver_connections")
    ]
    ratios = ", ".join(
        f"pair {n} ({placement(pair['capacity'])}) {pair['ratio']:.2f}{pair_marks(pair)}"
        for n, pair in alike
    )
    return (
        f"Pairs whose two sides fell alike on the receiver's workers: {len(alike)} of {len(pairs)}"
        + (f": {ratios}." if alike else ".")
    )


def packed(run: dict) -> bool:
    """Whether the run's connections fell on at most half as many workers as there were connections (`4`,
    `3+1`, `2+2` of 4): the placements cheapest for the receiver."""
    held = run.get("receiver_connections") or []
    return bool(held) and 2 * len(held) <= sum(held)


def reference_connects(pairs: list[dict]) -> str:
    """How the reference's clients connected: `stagger_seconds` apart (bench/receiver_capacity.py), or all at
    once in runs from before it was noted (until 2026-12-07)."""
    staggers = {pair["capacity"].get("stagger_seconds") for pair in pairs}
    if staggers == {None} or not staggers:
        return "all at once (within a millisecond), as the reference did until 2026-12-07"
    return " and ".join(
        "all at once" if not stagger else f"{stagger:g} s apart"
        for stagger in sorted(stagger or 0 for stagger in staggers)
    )


def packed_line(pairs: list[dict]) -> str:
    """How often each side's connections fell packed (`packed`): drawn alike, the two
    sides land packed about as often, and the median ratio is not tilted by the placement."""
    noted = [pair for pair in pairs if pair["capacity"].get("receiver_connections")]
    if not noted:
        return "No run noted how its connections fell on the receiver's workers."
    reference = sum(packed(pair["capacity"]) for pair in noted)
    outside = sum(packed(pair["one_call"]) for pair in noted)
    return (
        f"The reference's clients connected {reference_connects(pairs)}; connections packed (on at most "
        f"half as many workers as connections): the reference in {reference} of {len(noted)} runs, the dispatchers in "
        f"{outside} of {len(noted)}."
    )


def warm_up(report: dict) -> str:
    """The uncounted run each side made before the pairs: its handoffs, or that none was made (runs from before
    2026-12-07 10:00 made none)."""
    first = (report.get("warm_up") or {}).get("one_call")
    if not first:
        return "no run before the pairs"
    return f"{first['handoffs']:,} handoffs, and the reference for a second"


def section(report: dict, command: str) -> list[str]:
    lines = [
        "## One call per handoff, driven from outside",
        "",
        f"{report['dispatchers']} plain `manage.py dispatch --worker <name>` processes with the product's "
        "defaults (none of the bench's settings: one call per handoff, claim batch, idle sleep, log level and "
        "wake-ups as shipped), started once and left running as a deployment runs them. Another system's plain "
        f"SQL inserts {report['handoffs']:,} due handoffs a run (`bench/outside_check.py`, `INSERT_SQL`: the "
        f"columns an enqueued handoff needs), {report['chunk']:,} a transaction, each with the "
        "`pg_notify('handoff_due', …)` the product's own recording sends. A run's rate: its handoffs over the "
        "time from the commit of the run's first transaction (the first moment a dispatcher can see one; the "
        "other system's time writing it is not the product's, as the reference is counted once its clients "
        "all send) to the last `delivered_at`, on the database's clock; before the pairs each side runs once "
        f"uncounted ({warm_up(report)}); every run checked "
        "(each key delivered once, the receiver's task id stored). The reference: as many plain clients that "
        "only sign and send, against the same receiver, in interleaved pairs (`bench/pairs.py`). Beside each "
        "run, the CPU time a handoff cost (from `/proc`): the dispatchers' and the receiver's (gunicorn and "
        "its workers); the reference's clients' and the receiver's; and PostgreSQL's, which the dispatchers' "
        "CPU leaves out: on the source database their claims and outcomes (with the inserts and this check's "
        "polls, which the reference has not), on the receiver's its creates, either side.",
        "",
        "Both sides send the receiver the same request: captured byte for byte through a logging proxy, the "
        "same `POST /tasks` with the same headers (`Idempotency-Key`, `webhook-id`, `webhook-timestamp`, "
        "`webhook-signature`; no tracing header), a body of the same shape (88 against 93 bytes: the keys "
        "differ) with a `Content-Length`, not chunked, on keep-alive connections (4 for 400 calls), and the "
        "same 201 answer from the same code path (the idempotent create). What differs is where the "
        "connections land: the gunicorn worker that accepts a connection answers it for as long as it lives, "
        "and a worker holding several answers each for less CPU than several workers holding one each (fewer "
        "wake-ups a create). Receiver CPU ms a create by placement, either side, in 31 runs of 2 cores under "
        "load (December 2026): 2.4 with `4`, 2.5-2.9 with `3+1`, 2.5-3.2 with `2+2`, 3.0-3.6 with `2+1+1`, "
        "3.4-4.4 with `1+1+1+1`. The dispatchers connect as each one's first call of a run goes out (the "
        "receiver closed the idle ones meanwhile: gunicorn's 2 s keep-alive) and landed packed in 3 of 13 "
        "runs; the reference's clients, started and connected within a millisecond, landed packed in 8 of 13, "
        "so the reference was cheaper for the receiver than the runs divided by it. Since 2026-12-07 the "
        "reference's clients connect as the dispatchers' first calls of a run come, `STAGGER_SECONDS` (0.01 s) "
        "apart (`bench/receiver_capacity.py`; the four dispatchers' first calls came within 8-138 ms of each "
        "other, median 22 ms, in 14 runs under load), each connection made by its client's first call while "
        "the earlier ones are sending, the rate counted from the last one's first call; in 16 interleaved "
        "rounds at a load of 10-22 the receiver's CPU a create was 0.98 of the dispatchers' with clients 0.01 s "
        "apart, 0.91 all at once, 0.89 at 0.1 s (each spread by about 0.2: at that load the load moves it more "
        "than the stagger). Both sides now draw their placement alike. Neither side can choose it: gunicorn's "
        "workers race for each connection, a layout that fixes it (one worker, or a connection a worker) "
        "either makes the receiver a one-core bottleneck that hides the dispatchers' own CPU or gives up "
        "keep-alive, and judging only the pairs whose sides fell alike leaves a figure of however many pairs "
        "happened to (2 of 3 in the last idle run before the change). A pair "
        "whose sides fell differently still says as much about the placement as about the product: the last "
        "column says how each run fell (connections a worker, sampled every 0.25 s, the placement seen most "
        "often), and the lines below the table how often each side fell packed and which pairs fell alike. "
        "A run may show more connections than dispatchers: a dispatcher's second lane "
        "(`HANDOFF_DISPATCH_LANES`, 2) opens a second connection of the process's one pool when it claims a "
        "handoff committed during the first lane's call (each of 4 dispatchers held 2 at times; none with one "
        "lane, 3 runs; docs/scaling.md).",
        "",
        "```sh",
        command or report["command"],
        "```",
        "",
        "| pair | capacity: creates/s | outside: handoffs/s | outside / capacity | CPU ms a handoff: "
        "dispatchers, receiver | CPU ms a create: clients, receiver | PostgreSQL's CPU ms: outside a handoff "
        "(source, receiver's), capacity a create (receiver's) | receiver's connections a worker: "
        "capacity, outside |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, pair in enumerate(report["pairs"], 1):
        capacity, outside = pair["capacity"], pair["one_call"]
        lines.append(
            f"| {n} | {capacity['per_second']:,.0f} | {outside['per_second']:,.0f} | "
            f"{pair['ratio']:.2f}{pair_marks(pair)} | {outside['dispatchers_cpu_ms_per_handoff']:.2f}, "
            f"{outside['receiver_cpu_ms_per_handoff']:.2f} | {capacity['clients_cpu_ms_per_create']:.2f}, "
            f"{capacity['receiver_cpu_ms_per_create']:.2f} | {databases(capacity, outside)} | "
            f"{placement(capacity)}, {placement(outside)} |"
        )
    lines += [
        "",
        packed_line(report["pairs"]),
        "",
        alike_line(report["pairs"]),
        "",
        f"Outside / capacity: {report['describe']} (aim ≥ {report['aim']}: "
        f"{'met' if report['met'] else 'missed'}; every run checked: {report['checked']}).",
        "",
    ]
    return lines
