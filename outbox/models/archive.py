"""Settled handoffs that left the hot tables: one compact row per handoff, kept for search, reconciliation
and export (`outbox/services/retention.py` moves them here, docs/operations.md "Retention").

The outbox table, its attempts and events keep only what the dispatcher and the console still work on; a
year of delivered handoffs would otherwise grow those tables, their indexes, vacuum and every backup for
ever. What a person or reconciliation may still ask about a settled handoff (which task the receiver made
for this key, when, with which payload) stays here, with its attempts and events as one JSON document.
"""

from django.db import models
from django.db.models.functions import Now


class ArchivedHandoff(models.Model):
    """A settled handoff (delivered, cancelled or superseded) as it was when it left the hot tables. Keyed by
    the handoff's own id, so moving the same handoff twice is the same row (the move is idempotent)."""

    handoff_id = models.BigIntegerField(primary_key=True)
    workspace_id = models.PositiveIntegerField()
    action_key = models.CharField(max_length=200)
    instance_key = models.CharField(max_length=200, blank=True)
    step = models.CharField(max_length=60, blank=True)
    workflow = models.CharField(max_length=40)
    source_ref = models.CharField(max_length=120)
    # The source request revision (reconciliation's check that every approval has its handoff reads it).
    source_id = models.PositiveBigIntegerField()
    rule_version = models.CharField(max_length=40, blank=True)
    destination = models.CharField(max_length=40)
    final_state = models.CharField(max_length=20)
    # The receiver's task id (`Handoff.destination_id`) and the validated receipt it came in.
    task_id = models.CharField(max_length=120, blank=True)
    receipt = models.JSONField(default=dict, blank=True)
    payload_hash = models.CharField(max_length=64)
    # The request approved with the decision and frozen in the handoff (`Handoff.request`): what it sent.
    # Null where its step mapped none (the payload was sent as it is) and for rows archived before.
    request = models.JSONField(null=True, blank=True)
    work_status = models.CharField(max_length=16, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    settled_at = models.DateTimeField(help_text="The handoff's last change (its updated_at).")
    delivered_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(db_default=Now())
    # Every attempt, event and status event, compact: {"attempts": [...], "events": [...], "status_events": [...]}.
    history = models.JSONField(default=dict, blank=True)
    # What the console's search finds it by, as it was in the hot table (`outbox/search_text.py`); null for
    # rows archived before it was kept. On PostgreSQL a trigram index serves `LIKE '%…%'` (migration 0028).
    search_text = models.TextField(null=True, blank=True, editable=False)
    # Its subject's personal fields were erased on request (before or after it was archived).
    erasure = models.ForeignKey(
        "outbox.Erasure",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["action_key"], name="archived_handoff_unique_key"),
        ]
        indexes = [
            # Console search by key (exact or prefix), per workspace.
            models.Index(
                fields=["workspace_id", "action_key"],
                name="archived_handoff_ws_key_idx",
                opclasses=["int4_ops", "varchar_pattern_ops"],
            ),
            models.Index(fields=["source_id"], name="archived_handoff_source_idx"),
            # The export of one workspace over a time range.
            models.Index(
                fields=["workspace_id", "archived_at", "handoff_id"],
                name="archived_handoff_ws_time_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action_key} ({self.final_state}, archived)"
