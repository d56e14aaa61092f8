"""The guarantees every fault test checks after the faults heal, read with SQL from the outbox's database and
the receiver's (a psycopg connection each, or Django's: anything with `.execute(sql, params)` returning a
cursor), so that the tests whose processes run on hosts of their own (tests/hosts/) and the ones on the test
databases share one checker:

- nothing lost: every key made is a handoff, and each delivered one names the task the receiver holds for it;
- at most one effect per key at the receiver;
- nothing unsettled: no handoff pending, in flight or uncertain (needs attention is allowed only when asked);
- every event path legal: each event's move is in HANDOFF_TRANSITIONS and starts where the one before ended,
  and a handoff reaches delivered once;
- no attempt left in progress.
"""

from dataclasses import dataclass, field

from outbox.models.states import HANDOFF_TRANSITIONS, HandoffState

S = HandoffState
UNSETTLED = (S.PENDING, S.IN_FLIGHT, S.UNCERTAIN)


@dataclass
class Findings:
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unsettled: list[tuple[str, str]] = field(default_factory=list)
    illegal_paths: list[tuple] = field(default_factory=list)
    delivered_twice: list[str] = field(default_factory=list)
    wrong_task: list[str] = field(default_factory=list)
    attempts_in_progress: int = 0
    attention: list[str] = field(default_factory=list)

    def broken(self, *, attention_allowed: bool = False) -> dict:
        """The guarantees broken, by name (empty when all hold)."""
        found = {
            "lost": self.lost,
            "duplicated": self.duplicated,
            "unsettled": self.unsettled,
            "illegal event paths": self.illegal_paths,
            "delivered twice": self.delivered_twice,
            "delivered naming another task": self.wrong_task,
            "attempts in progress": self.attempts_in_progress,
        }
        if not attention_allowed:
            found["needs attention"] = self.attention
        return {name: value for name, value in found.items() if value}


def _rows(conn, sql: str, params=()) -> list[tuple]:
    return list(conn.execute(sql, params).fetchall())


def check_invariants(outbox, receiver, keys: list[str]) -> Findings:
    """What of the guarantees above is broken for the handoffs of `keys` (their receiver tasks included)."""
    found = Findings()
    handoffs = {
        key: (state, destination_id)
        for key, state, destination_id in _rows(
            outbox,
            "SELECT action_key, state, destination_id FROM outbox_handoff WHERE action_key = ANY(%s)",
            (keys,),
        )
    }
    tasks: dict[str, list[str]] = {}
    for key, task_id in _rows(
        receiver,
        "SELECT action_key, task_id::text FROM delivery_receivertask WHERE action_key = ANY(%s)",
        (keys,),
    ):
        tasks.setdefault(key, []).append(task_id)
    for key in keys:
        state, destination_id = handoffs.get(key, (None, None))
        if state is None or (state == S.DELIVERED and key not in tasks):
            found.lost.append(key)
        if len(tasks.get(key, [])) > 1:
            found.duplicated.append(key)
        if state in UNSETTLED:
            found.unsettled.append((key, state))
        if state == S.NEEDS_ATTENTION:
            found.attention.append(key)
        if state == S.DELIVERED and key in tasks and destination_id not in tasks[key]:
            found.wrong_task.append(key)
    _check_paths(outbox, keys, found)
    found.attempts_in_progress = _rows(
        outbox,
        "SELECT count(*) FROM outbox_attempt a JOIN outbox_handoff h ON h.id = a.handoff_id "
        "WHERE a.outcome = 'in_progress' AND h.action_key = ANY(%s)",
        (keys,),
    )[0][0]
    return found


def _check_paths(outbox, keys: list[str], found: Findings) -> None:
    events = _rows(
        outbox,
        "SELECT h.action_key, e.from_state, e.to_state, e.actor_label FROM outbox_handoffevent e "
        "JOIN outbox_handoff h ON h.id = e.handoff_id WHERE h.action_key = ANY(%s) ORDER BY e.id",
        (keys,),
    )
    last: dict[str, str] = {}
    delivered: dict[str, int] = {}
    for key, from_state, to_state, actor in events:
        if not from_state and key not in last:
            last[key] = to_state  # the handoff's birth, when it was recorded
            continue
        # The first event starts from pending (a handoff is made pending, with no event for its birth).
        before = last.get(key, S.PENDING)
        if from_state != before or to_state not in HANDOFF_TRANSITIONS.get(from_state, ()):
            found.illegal_paths.append((key, before, from_state, to_state, actor))
        last[key] = to_state
        if to_state == S.DELIVERED:
            delivered[key] = delivered.get(key, 0) + 1
    found.delivered_twice = [key for key, n in delivered.items() if n > 1]
