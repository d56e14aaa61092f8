"""docs/benchmarks.md's lines for bench/settlement_bench.py: its row in the aims table and its section (a
backlog of uncertain outcomes settled by 1, 2 and 4 dispatchers, against the receiver's lookup capacity)."""


def aims_row(report: dict) -> str:
    return (
        f"| {report['outcomes']:,} uncertain outcomes settled by 4 dispatchers / the receiver's lookup capacity "
        f"(batch lookup of {report['batch']}): ≥ {report['aim']} | {report['ratio_at_4']:.2f} | "
        f"{'met' if report['met'] else 'missed'} |"
    )


def section(report: dict, command: str) -> list[str]:
    lines = [
        f"## Settlement of {report['outcomes']:,} uncertain outcomes",
        "",
        "Each outcome's task is at the receiver while its source row is uncertain (the answer was lost). "
        "`manage.py dispatch` processes settle the backlog through the bundled receiver, first asking "
        f"{report['batch']} keys a request (`POST /tasks/lookup`), then one key a request (`GET /tasks/<key>`). "
        "The backlog is released once every dispatcher of the run has started. A run's rate is taken over the "
        "span of its `delivered_at`; its requests are the message ids the receiver recorded. The capacity is "
        "what 4 plain client processes get from the receiver for the same kind of lookup in the same run.",
        "",
        "```sh",
        command or report["command"],
        "```",
        "",
        "| keys a request | receiver's capacity (keys/s) | dispatchers | settled/s | / capacity | each once "
        "| requests to the receiver |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode in report["modes"]:
        for run in mode["runs"]:
            lines.append(
                f"| {mode['batch']} | {mode['capacity_keys_per_second']:,.0f} | {run['dispatchers']} | "
                f"{run['per_second']:,.0f} | {run['ratio']:.2f} | {'yes' if run['settled_once'] else 'no'} | "
                f"{run.get('receiver_requests', '')} |"
            )
    lines += [
        "",
        f"At 4 dispatchers with batch lookups: {report['ratio_at_4']:.2f} of the receiver's capacity (aim ≥ "
        f"{report['aim']}: {'met' if report['met'] else 'missed'}).",
        "",
    ]
    return lines
