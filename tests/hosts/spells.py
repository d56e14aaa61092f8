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


KEY_ATTEMPTS_SQL = (
    "SELECT h.action_key, min(a.started_at), max(coalesce(a.finished_at, a.started_at)) "
    "FROM outbox_attempt a JOIN outbox_handoff h ON h.id = a.handoff_id "
    "WHERE h.action_key = ANY(%s) GROUP BY 1"
)


def broken_keys(broken: dict) -> list[str]:
    """The action keys a checker's findings name (a key, or a tuple that starts with one)."""
    keys = []
    for found in broken.values():
        for item in found if isinstance(found, list) else []:
            key = item[0] if isinstance(item, tuple) and item else item
            if isinstance(key, str) and key.count(":") >= 3:
                keys.append(key)
    return sorted(set(keys))


def spells_of_keys(run, schedule, began: float, keys: list[str]) -> dict[str, list[str]]:
    """Per key, the faults in force while its calls were made (from its first attempt's start to its last
    attempt's end): what a failing key went through."""
    with run.connect() as outbox:
        rows = outbox.execute(KEY_ATTEMPTS_SQL, (keys,)).fetchall()
    spans = {
        key: (first.timestamp() - began, last.timestamp() - began) for key, first, last in rows
    }
    return {
        key: [str(f) for f in schedule if f.start <= end and start <= f.start + f.duration]
        for key, (start, end) in spans.items()
    }
