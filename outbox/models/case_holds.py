"""An operator's hold of one case: one handoff, or one workflow instance (every step of it, those recorded
later too), with a reason, who set it and an optional end. While it holds, the handoffs it covers carry it
(`Handoff.case_hold`), and the claim's partial index leaves them out: nothing of the case is claimed or sent,
its keys and approval untouched. Ended by a person (resume), by its end passing, or once nothing it covers is
left open (a call under way at hold time delivered, a held failed row cancelled: `case_holds_expire`); the row
stays as the record."""

from django.db import models

from outbox.clock import DbClockDateTimeField, db_now
from outbox.models.handoffs import Handoff


class CaseHoldQuerySet(models.QuerySet):
    def live(self):
        """Not ended yet (an end time passed ends it at the next sweep, `case_holds_expire`)."""
        return self.filter(ended_at__isnull=True)

    def past_their_end(self):
        """Live, and their end has passed on the database clock."""
        return self.live().filter(ends_at__isnull=False, ends_at__lte=db_now())

    def to_end(self):
        """Live, and its end has passed or no open row carries it any more (nothing left to hold back): the
        sweep's one read, over the live holds (`case_hold_live_idx`), each asking `handoff_case_hold_idx`."""
        # `case_hold__isnull=False` as the partial index's condition: a plan that hashes the subquery reads
        # the few marked rows through it, never the whole outbox.
        carried = Handoff.objects.open().filter(
            case_hold__isnull=False, case_hold_id=models.OuterRef("pk")
        )
        return self.live().filter(
            models.Q(ends_at__isnull=False, ends_at__lte=db_now()) | ~models.Exists(carried)
        )


class CaseHold(models.Model):
    workspace_id = models.PositiveIntegerField()
    # What is held: a workflow instance (every step of it), or one handoff alone (blank instance key).
    instance_key = models.CharField(max_length=200, blank=True)
    # The handoff it was set from (no foreign key: retention archives handoffs, the hold stays as the record).
    handoff_id = models.PositiveBigIntegerField()
    action_key = models.CharField(max_length=200)
    reason = models.CharField(max_length=200)
    ends_at = models.DateTimeField(null=True, blank=True, help_text="Until; empty: until resumed.")
    set_by = models.CharField(max_length=150)
    created_at = DbClockDateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.CharField(max_length=150, blank=True)
    end_reason = models.CharField(max_length=200, blank=True)

    objects = CaseHoldQuerySet.as_manager()

    class Meta:
        indexes = [
            # The sweep's "live holds past their end" and one case's live hold.
            models.Index(
                fields=["ends_at"],
                condition=models.Q(ended_at__isnull=True),
                name="case_hold_live_idx",
            ),
            models.Index(fields=["instance_key"], name="case_hold_instance_idx"),
        ]

    def __str__(self) -> str:
        return f"hold of {self.what} by {self.set_by}"

    @property
    def whole_case(self) -> bool:
        return bool(self.instance_key)

    @property
    def what(self) -> str:
        """The held case as the screens name it."""
        return f"workflow instance {self.instance_key}" if self.whole_case else self.action_key
