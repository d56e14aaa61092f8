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
        "time from the first insert to the last `delivered_at`, on the database's clock; every run checked "
        "(each key delivered once, the receiver's task id stored). The reference: as many plain clients that "
        "only sign and send, against the same receiver, in interleaved pairs (`bench/pairs.py`). Beside each "
        "run, the CPU time a handoff cost (from `/proc`): the dispatchers' and the receiver's (gunicorn and "
        "its workers); the reference's clients' and the receiver's.",
        "",
        "```sh",
        command or report["command"],
        "```",
        "",
        "| pair | capacity: creates/s | outside: handoffs/s | outside / capacity | CPU ms a handoff: "
        "dispatchers, receiver | CPU ms a create: clients, receiver |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n, pair in enumerate(report["pairs"], 1):
        capacity, outside = pair["capacity"], pair["one_call"]
        lines.append(
            f"| {n} | {capacity['per_second']:,.0f} | {outside['per_second']:,.0f} | "
            f"{pair['ratio']:.2f}{pair_marks(pair)} | {outside['dispatchers_cpu_ms_per_handoff']:.2f}, "
            f"{outside['receiver_cpu_ms_per_handoff']:.2f} | {capacity['clients_cpu_ms_per_create']:.2f}, "
            f"{capacity['receiver_cpu_ms_per_create']:.2f} |"
        )
    lines += [
        "",
        f"Outside / capacity: {report['describe']} (aim ≥ {report['aim']}: "
        f"{'met' if report['met'] else 'missed'}; every run checked: {report['checked']}).",
        "",
    ]
    return lines
