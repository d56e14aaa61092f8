"""docs/benchmarks.md's lines for bench/settlement_bench.py: its row in the aims table and its section (a
backlog of uncertain outcomes settled by 1, 2 and 4 dispatchers, against the receiver's lookup capacity)."""


def _ceiling(mode: dict) -> str:
    if "ceiling_keys_per_second" not in mode:
        return ""
    return (
        f"; this machine's ceiling for it is {mode['ceiling_ratio']:.2f} of that capacity "
        f"({mode['ceiling_keys_per_second']:,.0f} keys/s), and 4 dispatchers reached "
        f"{mode['runs'][-1]['of_ceiling']:.2f} of the ceiling"
    )


def _repeats(report: dict) -> str:
    repeat = report["modes"][0].get("repeat", 1)
    if repeat < 2:
        return ""
    if "of_ceiling_paired_by_dispatchers" in report["modes"][0]:
        return (
            f" Each dispatcher count is {repeat} pairs (`bench/pairs.py`) of the machine's ceiling, measured "
            "afresh, and a settlement run; the row is the run of the pair with the median ratio (every pair's "
            "rate in the last column), the capacity and the writes alone the medians of every pair's."
        )
    return (
        f" Each row is the median of {repeat} runs (every run's rate in the last column); the writes alone, "
        f"the median of {repeat} measurements."
    )


def _paired_by_count(report: dict) -> list[str]:
    """Each dispatcher count against the ceiling in pairs, per kind of lookup, as judged (refused or not)."""
    lines = []
    for mode in report["modes"]:
        by_count = mode.get("of_ceiling_paired_by_dispatchers")
        if not by_count:
            continue
        kind = f"batch lookups of {mode['batch']}" if mode["batch"] > 1 else "one key a request"
        judged = "; ".join(
            f"{count} dispatcher{'s' if int(count) > 1 else ''}: {figure['describe']}"
            for count, figure in sorted(by_count.items(), key=lambda item: int(item[0]))
        )
        lines.append(f"Against the ceiling in pairs, {kind}: {judged}.")
    return [*lines, ""] if lines else []


def _single(report: dict) -> str:
    single = [mode for mode in report["modes"] if mode["batch"] == 1]
    if not single:
        return ""
    run = single[0]["runs"][-1]
    return f". One key a request (`GET /tasks/<key>`): {run['ratio']:.2f} of that lookup's capacity"


def _paired(report: dict) -> str:
    """4 dispatchers against the ceiling in pairs (bench/pairs.py), per kind of lookup, when measured."""
    judged = [
        f"{'batch' if mode['batch'] > 1 else 'one key a request'}: {mode['of_ceiling_paired']['describe']}"
        for mode in report["modes"]
        if "of_ceiling_paired" in mode
    ]
    return f". Against the ceiling in pairs, {'; '.join(judged)}" if judged else ""


def aims_row(report: dict) -> str:
    batched = report["modes"][0]
    return (
        f"| {report['outcomes']:,} uncertain outcomes settled by 4 dispatchers / the receiver's lookup capacity "
        f"(batch lookup of {report['batch']}): ≥ {report['aim']} | {report['ratio_at_4']:.2f}{_ceiling(batched)}"
        f"{_single(report)}{_paired(report)} | {'met' if report['met'] else 'missed'} |"
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
        "what 4 plain client processes get from the receiver for the same kind of lookup in the same run."
        + _repeats(report),
        "",
        "The ceiling is what this machine allows any settler: each key costs its lookup at the receiver's full "
        "speed and its writes at the database's, on the same two cores, so it is 1 / (1 / capacity + 1 / "
        "writes alone). Writes alone: 4 plain SQL clients (psycopg, no Django, no lookup) settle the same "
        "backlog with the least a settlement writes: a claim of 100 (SKIP LOCKED, a lease, a new fencing "
        "token), then each row delivered with its receipt and one event, one statement per 100.",
        "",
        "```sh",
        command or report["command"],
        "```",
        "",
        "| keys a request | receiver's capacity (keys/s) | writes alone (keys/s) | ceiling (keys/s) | "
        "dispatchers | settled/s | / capacity | / ceiling | each once | requests to the receiver | every run's "
        "settled/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode in report["modes"]:
        for run in mode["runs"]:
            lines.append(
                f"| {mode['batch']} | {mode['capacity_keys_per_second']:,.0f} | "
                f"{mode.get('writes_alone_keys_per_second', 0):,.0f} | {mode.get('ceiling_keys_per_second', 0):,.0f} | "
                f"{run['dispatchers']} | {run['per_second']:,.0f} | {run['ratio']:.2f} | "
                f"{run.get('of_ceiling', 0):.2f} | {'yes' if run['settled_once'] else 'no'} | "
                f"{run.get('receiver_requests', '')} | "
                f"{', '.join(f'{each:,.0f}' for each in run.get('each_per_second', [run['per_second']]))} |"
            )
    lines += [
        "",
        f"At 4 dispatchers with batch lookups: {report['ratio_at_4']:.2f} of the receiver's capacity (aim ≥ "
        f"{report['aim']}: {'met' if report['met'] else 'missed'}){_ceiling(report['modes'][0])}.",
        "",
        *_paired_by_count(report),
        *_reading(report),
    ]
    return lines


def _reading(report: dict) -> list[str]:
    """What the figures say about the aim, from the figures themselves."""
    batched = report["modes"][0]
    if "ceiling_ratio" not in batched or batched["ceiling_ratio"] >= report["aim"]:
        return []
    single = [mode for mode in report["modes"] if mode["batch"] == 1]
    per_request = ""
    if single:
        per_request = (
            f" ({batched['capacity_keys_per_second'] / report['batch']:,.0f} requests of {report['batch']} keys a "
            f"second against {single[0]['capacity_keys_per_second']:,.0f} of one key)"
        )
    lines = [
        f"The receiver answers a request of {report['batch']} keys for little more than one of a single "
        f"key{per_request}, so here the settlement's own writes (a claim, then each row and its event) cost more "
        "than the lookups: on two cores shared by the "
        "receiver, PostgreSQL and the settlers, no settler can reach "
        f"{report['aim']} of the receiver's batch capacity; {batched['ceiling_ratio']:.2f} is the most. The "
        "aim can hold only where the receiver does not share the database's and the settlers' cores (as in "
        "production: see `docs/scaling.md`).",
    ]
    if single:
        run = single[0]["runs"][-1]
        lines.append("")
        lines.append(
            "One key a request, where the lookups are the cost, 4 dispatchers reach "
            f"{run['ratio']:.2f} of the receiver's capacity ({run['of_ceiling']:.2f} of the ceiling): a "
            "dispatcher asks a chunk of keys under one permit (`LimitedLookups.lookup_each`) and records their "
            "answers in one statement."
        )
    return [*lines, ""]
