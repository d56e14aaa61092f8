"""Starting a replay and its preview: ask each handoff's destination about its key before anything is sent.

`replay_start` (or `replay_start_for_incident`) writes one item per handoff and queues the preview, a
background job; `replay_preview_run` asks the destinations a chunk at a time (a few lookups at once, each
under the destination's limits) and writes each item's verdict and the counts after every chunk, so the page
shows progress and a resumed job continues where it stopped. Nothing is changed at the source or the
receiver by a preview: it only reads.
"""

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Count

from incidents.models import (
    Incident,
    IncidentMember,
    Replay,
    ReplayItem,
    ReplayState,
    ReplayVerdict,
)
from incidents.services.incidents import incident_event
from lib.databases import DB
from outbox.clock import DbNow
from outbox.destinations import LookupFailed, RemoteTask, destination_named
from outbox.destinations.registry import DestinationUnavailable
from outbox.models import NEEDS_PERSON_STATES, Handoff
from outbox.outcomes import Unanswered
from outbox.redaction import redact_text
from outbox.services.bulk import BULK_JOB_LIMIT
from outbox.services.lookup_limits import lookups_under_limits
from reconciliation.errors import ReconciliationError

CHUNK = 100
# Items asked per progress write: a few batch requests, or a few hundred single lookups at once.
PREVIEW_CHUNK = 400
# Lookups asked at once within a chunk (each still takes a permit of the destination's limits).
LOOKUPS_AT_ONCE = 4
# A background job may wait for the destination's limits longer than a person's reconcile does.
LOOKUP_WAIT_SECONDS = 30.0
WORKER = "replay preview"
NO_LOOKUP = "the destination cannot be asked about a key: a person checks at the receiver"


class NothingToReplay(ReconciliationError):
    """No handoff of the viewer's workspaces is a member: there is nothing to preview."""


class TooManyToReplay(ReconciliationError):
    """More handoffs than one replay may cover: a narrower filter first."""


def _enqueue_not_rollback_safe(task: str, replay_id: int) -> None:
    if not settings.HANDOFF_WAKE_ON_COMMIT:
        return  # no cluster to wake (tests run the job themselves; the alert sweep resumes stalled ones)
    from django_q.tasks import async_task

    async_task(task, replay_id, q_options={"task_name": f"{task.rsplit('.', 1)[-1]}-{replay_id}"})


def replay_enqueue(task: str, replay_id: int) -> None:
    """Queue a replay's job after the caller's transaction commits."""
    transaction.on_commit(lambda: _enqueue_not_rollback_safe(task, replay_id), using=DB)


def replay_start(
    *,
    handoffs,
    workspace_ids: Iterable[int],
    actor,
    incident: Incident | None = None,
    description: str = "",
) -> Replay:
    """A replay over `handoffs` (a queryset the caller scoped to the person's workspaces), in id order, and
    its preview queued. NothingToReplay when there is none; TooManyToReplay past `BULK_JOB_LIMIT`."""
    rows = list(
        handoffs.order_by("pk").values_list("pk", "action_key", "destination", "workspace_id")[
            : BULK_JOB_LIMIT + 1
        ]
    )
    if not rows:
        raise NothingToReplay("no handoff of your workspaces to replay")
    if len(rows) > BULK_JOB_LIMIT:
        raise TooManyToReplay(f"more than {BULK_JOB_LIMIT} handoffs: narrow the filter first")
    with transaction.atomic(using=DB):
        replay = Replay.objects.using(DB).create(
            incident=incident,
            workspace_ids=sorted(set(workspace_ids)),
            description=description[:300],
            actor=actor,
            total=len(rows),
        )
        ReplayItem.objects.using(DB).bulk_create(
            (
                ReplayItem(
                    replay=replay,
                    position=n,
                    handoff_id=pk,
                    action_key=key,
                    destination=destination,
                    workspace_id=workspace,
                )
                for n, (pk, key, destination, workspace) in enumerate(rows, start=1)
            ),
            batch_size=1000,
        )
        if incident is not None:
            incident_event(
                incident, "replay_previewing", actor=actor, note=f"replay {replay.pk}: {len(rows)}"
            )
        replay_enqueue("incidents.tasks.replay_preview", replay.pk)
    return replay


def replay_start_for_incident(*, incident_id: int, workspace_ids: list[int], actor) -> Replay:
    """A replay of the incident's unsettled handoff members in these workspaces."""
    incident = Incident.objects.using(DB).get(pk=incident_id)
    members = IncidentMember.objects.using(DB).filter(
        incident=incident,
        handoff_id__isnull=False,
        settled_at__isnull=True,
        workspace_id__in=workspace_ids,
    )
    handoffs = Handoff.objects.using(DB).filter(
        pk__in=members.values("handoff_id"), workspace_id__in=workspace_ids
    )
    return replay_start(
        handoffs=handoffs,
        workspace_ids=workspace_ids,
        actor=actor,
        incident=incident,
        description=f"incident {incident.pk}: {incident.title}",
    )


def _verdict_of(handoff: Handoff, remote: RemoteTask | None, idempotent: bool) -> tuple[str, str]:
    if remote is not None and remote.same_payload(handoff.sent_body, handoff.payload_hash):
        return (
            ReplayVerdict.PRESENT,
            f"the receiver has task {remote.task_id} with the same payload",
        )
    if remote is not None:
        return (
            ReplayVerdict.CONFLICT,
            f"the receiver has task {remote.task_id} with another payload",
        )
    if handoff.outcome_unknown and not idempotent:
        return (
            ReplayVerdict.CANNOT_ASK,
            "not there now, and the destination ignores the key: a call may still land",
        )
    return ReplayVerdict.MISSING, "the receiver has no task for this key"


def _unanswered(exc: LookupFailed) -> str:
    """A failed lookup's note, read by its flag as settlement reads it (`Unanswered.of`): one refused before
    asking (its destination's limits or a hold: another preview, a dispatcher or a settler held the shared
    limit the whole wait; its token endpoint) was never made and says "not asked: <what refused it>"; one
    made that failed, that the destination did not answer."""
    unanswered = Unanswered.of(exc)
    return redact_text(
        unanswered.words if not unanswered.asked else f"the destination did not answer: {exc}"
    )


def _ask(handoff: Handoff, lookups) -> tuple[str, str, str]:
    """(verdict, task id, note) of one handoff, asked through its destination's limited lookups."""
    try:
        remote = lookups.lookup(handoff.action_key)
    except LookupFailed as exc:
        return ReplayVerdict.CANNOT_ASK, "", _unanswered(exc)
    verdict, note = _verdict_of(handoff, remote, lookups.supports_idempotency)
    return verdict, (remote.task_id if remote else ""), note


def _ask_many(handoffs: list[Handoff], lookups) -> list[tuple[str, str, str]]:
    """The same for many handoffs of one destination, in one request (its batch lookup)."""
    try:
        found = lookups.lookup_many([h.action_key for h in handoffs])
    except LookupFailed as exc:
        return [(ReplayVerdict.CANNOT_ASK, "", _unanswered(exc))] * len(handoffs)
    answers = []
    for handoff in handoffs:
        remote = found.get(handoff.action_key)
        verdict, note = _verdict_of(handoff, remote, lookups.supports_idempotency)
        answers.append((verdict, remote.task_id if remote else "", note))
    return answers


def in_own_connection(call, *args):
    """Run `call` in a worker thread, closing the thread's own database connections afterwards."""
    try:
        return call(*args)
    finally:
        connections.close_all()  # this thread's own connections (the permits' queries ran on them)


def _batch_size(lookups) -> int:
    # A destination kind that answers for many keys in one request says how many (`lookup_batch_size`).
    return lookups.lookup_batch_size


def _requests(asked: list[tuple]) -> list[tuple]:
    """The chunk's lookups as requests: a batch per destination that answers for many keys at once, else
    one request per key. Each is (function, handoffs, lookups, the items it answers for)."""
    requests, batches = [], {}
    for item, handoff, lookups in asked:
        if _batch_size(lookups) > 1:
            batches.setdefault(id(lookups), (lookups, []))[1].append((item, handoff))
        else:
            requests.append((_ask, handoff, lookups, [item]))
    for lookups, pairs in batches.values():
        size = _batch_size(lookups)
        for start in range(0, len(pairs), size):
            part = pairs[start : start + size]
            requests.append((_ask_many, [h for _, h in part], lookups, [i for i, _ in part]))
    return requests


def threads_allowed() -> bool:
    """Whether work may go to other threads (their own connections): on PostgreSQL, outside a transaction.
    Not on SQLite, whose test database is one in-memory connection that threads cannot share, nor inside a
    transaction, whose rows and locks other connections would not see or would wait for."""
    connection = connections[DB]
    return connection.vendor == "postgresql" and not connection.in_atomic_block


def _answer_all(asked: list[tuple]) -> None:
    """Ask every lookup of a chunk and write the answers on its items: a few requests at once where
    `threads_allowed`, else one after another."""
    requests = _requests(asked)
    if len(requests) < 2 or not threads_allowed():
        answers = [call(arg, lookups) for call, arg, lookups, _ in requests]
    else:
        with ThreadPoolExecutor(max_workers=LOOKUPS_AT_ONCE) as pool:
            futures = [
                pool.submit(in_own_connection, call, arg, lookups)
                for call, arg, lookups, _ in requests
            ]
            answers = [future.result() for future in futures]
    for (call, _, _, items), answer in zip(requests, answers, strict=True):
        for item, (verdict, task_id, note) in zip(
            items, answer if call is _ask_many else [answer], strict=True
        ):
            item.verdict, item.task_id, item.note = verdict, task_id[:200], note[:500]


def _lookups_for(name: str, cache: dict):
    if name not in cache:
        try:
            destination = destination_named(name)
        except DestinationUnavailable as exc:
            cache[name] = str(exc)
        else:
            cache[name] = (
                lookups_under_limits(destination, worker=WORKER, wait_seconds=LOOKUP_WAIT_SECONDS)
                if destination.supports_lookup
                else NO_LOOKUP
            )
    return cache[name]


def _preview_chunk(items: list[ReplayItem], cache: dict) -> None:
    handoffs = Handoff.objects.using(DB).in_bulk([item.handoff_id for item in items])
    asked = []
    for item in items:
        handoff = handoffs.get(item.handoff_id)
        if handoff is None or handoff.state not in NEEDS_PERSON_STATES:
            state = handoff.get_state_display() if handoff else "no such handoff any more"
            item.verdict, item.note = ReplayVerdict.NOTHING_TO_DO, f"{state}: nothing to replay"
            continue
        lookups = _lookups_for(item.destination, cache)
        if isinstance(lookups, str):
            item.verdict, item.note = ReplayVerdict.CANNOT_ASK, lookups[:500]
            continue
        asked.append((item, handoff, lookups))
    _answer_all(asked)
    ReplayItem.objects.using(DB).bulk_update(items, ["verdict", "task_id", "note"])


def item_counts(replay: Replay, field: str) -> dict[str, int]:
    """Items by their verdict or outcome, counted from the items (right after a resumed job too)."""
    rows = (
        ReplayItem.objects.using(DB)
        .filter(replay=replay)
        .exclude(**{field: ""})
        .order_by()
        .values_list(field)
        .annotate(n=Count("id"))
    )
    return dict(rows)


# What a chunk's end writes, per kind of item field: the counts' column, the total's, and (once done) the time.
PROGRESS_COLUMNS = {"verdict": ("verdicts", "previewed"), "outcome": ("outcomes", "applied")}


def record_progress(
    replay: Replay, field: str, next_state: str, time_field: str, *, done: bool
) -> None:
    """After a chunk: the items' counts by `field` and their total on the replay, and once `done` its next
    state and the time it got there; written only while the replay is still in the state it was read in
    (a cancelled or taken-over replay is left alone), then read back."""
    counts = item_counts(replay, field)
    counts_column, total_column = PROGRESS_COLUMNS[field]
    Replay.objects.using(DB).filter(pk=replay.pk, state=replay.state).update(
        **{counts_column: counts, total_column: sum(counts.values())},
        updated_at=DbNow(),
        **({"state": next_state, time_field: DbNow()} if done else {}),
    )
    replay.refresh_from_db()


def replay_preview_run(*, replay_id: int, chunk: int = PREVIEW_CHUNK) -> Replay:
    """Ask the destinations about every item not asked yet, a chunk at a time; then the replay waits for a
    person to confirm. Runs again safely: it continues with the items still without a verdict."""
    replay = Replay.objects.using(DB).get(pk=replay_id)
    cache: dict = {}
    while replay.state == ReplayState.PREVIEWING:
        items = list(
            ReplayItem.objects.using(DB)
            .filter(replay=replay, verdict="")
            .order_by("position")[:chunk]
        )
        if items:
            _preview_chunk(items, cache)
        done = not items
        record_progress(replay, "verdict", ReplayState.PREVIEWED, "previewed_at", done=done)
        if done and replay.incident_id is not None:
            incident_event(replay.incident, "replay_previewed", note=preview_words(replay))
    return replay


def preview_words(replay: Replay) -> str:
    counts = ", ".join(f"{label}: {n}" for _, label, n in replay.verdict_rows() if n)
    return f"replay {replay.pk}: {counts or 'nothing'}"
