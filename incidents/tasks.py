"""django-q2 tasks of incidents. Thin: call one service and return a small summary for the task result."""

from incidents.services.replay_preview import replay_preview_run
from incidents.services.replay_run import replay_run as replay_items_run
from incidents.sweep import alerts_send_due as sweep


def alerts_send_due() -> dict:
    return sweep().incidents


def replay_preview(replay_id: int) -> dict:
    replay = replay_preview_run(replay_id=replay_id)
    return {"replay": replay.pk, "state": replay.state, "verdicts": replay.verdicts}


def replay_run(replay_id: int) -> dict:
    replay = replay_items_run(replay_id=replay_id)
    return {"replay": replay.pk, "state": replay.state, "outcomes": replay.outcomes}
