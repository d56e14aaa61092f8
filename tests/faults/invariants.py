"""The guarantees every fault test checks after the faults heal, read with SQL from the outbox's database and
the receiver's (a psycopg connection each, or Django's: anything with `.execute(sql, params)` returning a
cursor), so that the tests whose processes run on hosts of their own (tests/hosts/) and the ones on the test
databases share one checker:

- nothing lost: every key made is a handoff, and each delivered one names the task the receiver holds for it;
- at most one effect per key at the receiver;
- nothing unsettled: no handoff pending, in flight or uncertain (needs attention is allowed only when asked);
- every event path legal: each event's move is in HANDOFF_TRANSITIONS and starts where the one before ended,
  and a handoff reaches delivered once;
- no attempt left in progress;
- no incident left open for a healed cause (`incidents_open_for_healed_causes`, after the product's own alert
  sweep has had its chance: a caller waits on it with a deadline).

Destinations other than the bundled receiver (a ledger, an SMTP server) are checked the same way: their
effects per key are handed in (`effects`), and a destination that cannot be asked about a key (`smtp`) may
hand a call whose outcome is unknown to a person (`persons_may_take`): allowed only for a call that had
begun and whose outcome is unknown (an attempt abandoned mid-call or uncertain, its call started).
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
    to_person_unstarted: list[tuple] = field(default_factory=list)

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
            "handed to a person though its call had not begun": self.to_person_unstarted,
        }
        if not attention_allowed:
            found["needs attention"] = self.attention
        return {name: value for name, value in found.items() if value}


def _rows(conn, sql: str, params=()) -> list[tuple]:
    return list(conn.execute(sql, params).fetchall())


def check_invariants(
    outbox,
    receiver,
    keys: list[str],
    *,
    effects: dict[str, list[str]] | None = None,
    persons_may_take: frozenset[str] = frozenset(),
) -> Findings:
    """What of the guarantees above is broken for the handoffs of `keys` (their receiver tasks included).
    `effects`: per key, the ids other destinations hold for it; `persons_may_take`: destinations whose
    unknown outcomes go to a person."""
    found = Findings()
    handoffs = {
        key: (state, destination_id, destination)
        for key, state, destination_id, destination in _rows(
            outbox,
            "SELECT action_key, state, destination_id, destination FROM outbox_handoff "
            "WHERE action_key = ANY(%s)",
            (keys,),
        )
    }
    tasks: dict[str, list[str]] = {key: list(ids) for key, ids in (effects or {}).items()}
    for key, task_id in _rows(
        receiver,
        "SELECT action_key, task_id::text FROM delivery_receivertask WHERE action_key = ANY(%s)",
        (keys,),
    ):
        tasks.setdefault(key, []).append(task_id)
    for key in keys:
        state, destination_id, destination = handoffs.get(key, (None, None, None))
        if state is None or (state == S.DELIVERED and key not in tasks):
            found.lost.append(key)
        if len(tasks.get(key, [])) > 1:
            found.duplicated.append(key)
        if state in UNSETTLED:
            found.unsettled.append((key, state))
        if state == S.NEEDS_ATTENTION and destination not in persons_may_take:
            found.attention.append(key)
        if state == S.DELIVERED and key in tasks and destination_id not in tasks[key]:
            found.wrong_task.append(key)
    _check_paths(outbox, keys, found)
    persons = [
        k
        for k, (state, _, dest) in handoffs.items()
        if state == S.NEEDS_ATTENTION and dest in persons_may_take
    ]
    started = {
        key
        for (key,) in _rows(
            outbox,
            "SELECT DISTINCT h.action_key FROM outbox_attempt a JOIN outbox_handoff h ON h.id = a.handoff_id "
            "WHERE h.action_key = ANY(%s) AND a.outcome IN ('abandoned', 'uncertain') AND a.call_started",
            (persons,),
        )
    }
    # Each with its attempts (number, outcome, call started, reason, worker): the evidence of a broken case.
    found.to_person_unstarted = [
        (
            key,
            _rows(
                outbox,
                "SELECT a.number, a.outcome, a.call_started, a.reason_code, a.worker FROM outbox_attempt a "
                "JOIN outbox_handoff h ON h.id = a.handoff_id WHERE h.action_key = %s ORDER BY a.number",
                (key,),
            ),
        )
        for key in persons
        if key not in started
    ]
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


def incidents_open_for_healed_causes(outbox) -> list[tuple]:
    """Live incidents (open or acknowledged) none of whose members is a handoff a person must settle: once
    every fault has healed and the handoffs have settled, each of these should have resolved by itself
    (`incidents/services/incidents.py`: a condition when it ends, any other once its cause is not seen
    and every member is settled). (id, kind, cause) each."""
    return _rows(
        outbox,
        "SELECT i.id, i.kind, i.cause FROM reconciliation_incident i WHERE i.state IN ('open', "
        "'acknowledged') AND NOT EXISTS (SELECT 1 FROM reconciliation_incidentmember m JOIN "
        "outbox_handoff h ON h.id = m.handoff_id WHERE m.incident_id = i.id AND h.state = %s) "
        "ORDER BY i.id",
        (S.NEEDS_ATTENTION,),
    )
