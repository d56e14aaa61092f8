"""A replay of many handoffs (an incident's members, or a filter's), previewed item by item.

The preview asks each handoff's destination about its key and writes what it found per item, with counts:
already there (will be settled, not sent), missing (will be sent), cannot be asked (needs a person). The
run then does what each item's preview said, and writes each item's result. Both are background jobs with
their progress on the row, so a thousand lookups never sit in a web request; the items are the per-item
result list that the console shows and exports as CSV.
"""

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class ReplayState(models.TextChoices):
    PREVIEWING = "previewing", "Asking the destinations"
    PREVIEWED = "previewed", "Previewed: waiting for confirmation"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


# Every allowed move of a replay: previewed once, run at most once.
REPLAY_TRANSITIONS: dict[str, frozenset[str]] = {
    ReplayState.PREVIEWING: frozenset({ReplayState.PREVIEWED}),
    ReplayState.PREVIEWED: frozenset({ReplayState.RUNNING}),
    ReplayState.RUNNING: frozenset({ReplayState.DONE}),
    ReplayState.DONE: frozenset(),
}


class ReplayVerdict(models.TextChoices):
    """What the preview found for one item: what the run will do with it."""

    PRESENT = "present", "already there (will be settled, not sent)"
    MISSING = "missing", "missing (will be sent)"
    CANNOT_ASK = "cannot_ask", "cannot be asked (needs a person)"
    CONFLICT = "conflict", "there with another payload (needs a person)"
    NOTHING_TO_DO = "nothing_to_do", "nothing to replay (settled, or on its way)"


# The verdicts the run acts on; the others are left as they are.
ACTED_ON = frozenset({ReplayVerdict.PRESENT, ReplayVerdict.MISSING})


class ReplayOutcome(models.TextChoices):
    """What the run did with one item."""

    SETTLED = "settled", "settled by lookup, not sent"
    SENT = "sent", "sent again with the same key"
    # Retried, its case held by an operator: waits for the release (docs/console.md, "hold / resume").
    QUEUED = "queued", "queued with the same key behind a case hold"
    # Items the preview found nothing to replay for: said by what they are, never "left for a person".
    ALREADY_DELIVERED = "delivered", "already delivered, nothing sent"
    NOTHING = "nothing", "nothing to do (on its way, or closed)"
    CHANGED = "changed", "the receiver's answer changed since the preview"
    SKIPPED = "skipped", "skipped"
    LEFT = "left", "left for a person"


class ReplayQuerySet(models.QuerySet):
    def unfinished(self):
        return self.exclude(state=ReplayState.DONE)


class Replay(models.Model):
    incident = models.ForeignKey(
        "incidents.Incident",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="replays",
        help_text="None: the members of a filter of the handoff list.",
    )
    # The starter's workspaces: only people who may see all of them see the replay.
    workspace_ids = models.JSONField(default=list)
    description = models.CharField(max_length=300, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(
        max_length=12, choices=ReplayState.choices, default=ReplayState.PREVIEWING
    )
    total = models.PositiveIntegerField(default=0)
    previewed = models.PositiveIntegerField(default=0, db_default=0)
    applied = models.PositiveIntegerField(default=0, db_default=0)
    verdicts = models.JSONField(default=dict, help_text="verdict: count, from the preview")
    outcomes = models.JSONField(default=dict, help_text="outcome: count, from the run")
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # All on the database clock: a stalled job is found by comparing updated_at with its now().
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    previewed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ReplayQuerySet.as_manager()

    class Meta:
        db_table = "reconciliation_replay"
        indexes = [models.Index(fields=["state", "updated_at"], name="replay_state_idx")]

    def __str__(self) -> str:
        return f"replay {self.pk} ({self.state}, {self.total} items)"

    def can_move_to(self, state: str) -> bool:
        return state in REPLAY_TRANSITIONS[self.state]

    # What templates ask of a replay (a template never spells a state's name).
    @property
    def is_working(self) -> bool:
        return self.state in (ReplayState.PREVIEWING, ReplayState.RUNNING)

    @property
    def awaits_confirmation(self) -> bool:
        return self.state == ReplayState.PREVIEWED

    @property
    def is_done(self) -> bool:
        return self.state == ReplayState.DONE

    def verdict_rows(self) -> list[tuple[str, str, int]]:
        """(verdict, its words, count) for every verdict, in the order the page and the CSV name them."""
        return [(v.value, v.label, self.verdicts.get(v.value, 0)) for v in ReplayVerdict]

    def outcome_rows(self) -> list[tuple[str, str, int]]:
        return [(o.value, o.label, self.outcomes.get(o.value, 0)) for o in ReplayOutcome]


class ReplayItem(models.Model):
    replay = models.ForeignKey(Replay, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    handoff_id = models.BigIntegerField()
    action_key = models.CharField(max_length=200)
    destination = models.CharField(max_length=40)
    workspace_id = models.PositiveIntegerField()
    verdict = models.CharField(max_length=16, choices=ReplayVerdict.choices, blank=True)
    task_id = models.CharField(max_length=200, blank=True)
    note = models.CharField(max_length=500, blank=True)
    outcome = models.CharField(max_length=12, choices=ReplayOutcome.choices, blank=True)
    outcome_note = models.CharField(max_length=500, blank=True)
    state_after = models.CharField(max_length=20, blank=True)

    class Meta:
        db_table = "reconciliation_replayitem"
        constraints = [
            models.UniqueConstraint(fields=["replay", "position"], name="replay_item_position"),
            models.UniqueConstraint(fields=["replay", "handoff_id"], name="replay_item_handoff"),
        ]

    def __str__(self) -> str:
        return f"{self.action_key} in replay {self.replay_id}: {self.verdict or 'not asked yet'}"
