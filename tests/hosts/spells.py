"""What happened during each fault of a played schedule (tests/hosts/schedules.py), for the soak's record and
for the reader of a failure: per fault, the calls the dispatchers began while it lasted, by destination and
outcome (the outbox's attempts), and the faults the receiver fired then (its own record, by kind).

Windows are wall-clock times: the attempts' start is written by the dispatchers, the receiver's record by
the receiver; a host whose clock the schedule jumped writes its own time, which this reads as it is."""

from datetime import UTC, datetime

ATTEMPTS_SQL = (
    "SELECT h.destination, a.outcome, count(*) FROM outbox_attempt a "
    "JOIN outbox_handoff h ON h.id = a.handoff_id "
    "WHERE a.started_at >= %s AND a.started_at < %s GROUP BY 1, 2 ORDER BY 1, 2"
)
FIRED_SQL = (
    "SELECT kind, count(*) FROM delivery_firedfault "
    "WHERE fired_at >= %s AND fired_at < %s GROUP BY 1 ORDER BY 1"
)


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def spell_report(run, schedule, began: float) -> list[dict]:
    """Per fault of `schedule` (played from the Unix time `began`): its name, the calls begun in its window
    as {destination: {outcome: count}}, and the receiver's faults fired then as {kind: count}."""
    report = []
    with run.connect() as outbox, run.connect("delivery") as receiver:
        for fault in schedule:
            window = (_at(began + fault.start), _at(began + fault.start + fault.duration))
            calls: dict[str, dict[str, int]] = {}
            for destination, outcome, count in outbox.execute(ATTEMPTS_SQL, window).fetchall():
                calls.setdefault(destination, {})[outcome] = count
            fired = dict(receiver.execute(FIRED_SQL, window).fetchall())
            report.append({"fault": str(fault), "calls": calls, "receiver_fired": fired})
    return report


def spell_lines(report: list[dict]) -> str:
    """The report, a line per fault."""
    return "\n".join(
        f"{entry['fault']}: calls {entry['calls'] or 'none'}; receiver fired {entry['receiver_fired'] or 'none'}"
        for entry in report
    )
