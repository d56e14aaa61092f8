"""Reads of replays for the console: who may see one (a person whose workspaces include every workspace the
replay was started for), its items a page at a time, and its per-item result list as CSV rows."""

from collections.abc import Iterable, Iterator

from incidents.models import Replay, ReplayItem
from lib.databases import DB
from outbox.redaction import redact_text

ITEMS_PAGE = 100
CSV_HEADER = (
    "position",
    "handoff_id",
    "action_key",
    "workspace",
    "destination",
    "preview",
    "preview_note",
    "receiver_task",
    "result",
    "result_note",
    "state_after",
)


def replay_visible(workspace_ids: Iterable[int], pk: int) -> Replay | None:
    replay = Replay.objects.using(DB).select_related("incident", "actor").filter(pk=pk).first()
    if replay is None or not set(replay.workspace_ids) <= set(workspace_ids):
        return None
    return replay


def replays_of_incident(incident, workspace_ids: Iterable[int]) -> list[Replay]:
    """The incident's replays the viewer may see, newest first (a few: one per preview a person asked)."""
    scope = set(workspace_ids)
    rows = Replay.objects.using(DB).filter(incident=incident).order_by("-pk")[:20]
    return [replay for replay in rows if set(replay.workspace_ids) <= scope]


def replay_items_page(replay: Replay, *, after: int = 0) -> tuple[list[ReplayItem], int | None]:
    """Items after a position (keyset), and the position the next page starts after (None: the last)."""
    page = list(
        ReplayItem.objects.using(DB)
        .filter(replay=replay, position__gt=after)
        .order_by("position")[: ITEMS_PAGE + 1]
    )
    more = len(page) > ITEMS_PAGE
    return page[:ITEMS_PAGE], (page[ITEMS_PAGE - 1].position if more else None)


def replay_csv_rows(replay: Replay, *, chunk: int = 2000) -> Iterator[tuple]:
    """The header, then one row per item in order, read a chunk at a time (a large replay streams)."""
    yield CSV_HEADER
    after = 0
    while True:
        items = list(
            ReplayItem.objects.using(DB)
            .filter(replay=replay, position__gt=after)
            .order_by("position")[:chunk]
        )
        if not items:
            return
        for item in items:
            yield (
                item.position,
                item.handoff_id,
                item.action_key,
                item.workspace_id,
                item.destination,
                item.get_verdict_display() if item.verdict else "not asked yet",
                redact_text(item.note),
                item.task_id,
                item.get_outcome_display() if item.outcome else "",
                redact_text(item.outcome_note),
                item.state_after,
            )
        after = items[-1].position
