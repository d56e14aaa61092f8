"""The outbox row: one per approved action to hand off, and the derived rules over handoffs.

A handoff carries everything it needs (workspace id, source reference, action key, payload)
so that this app depends on no other app of the product.
"""

from django.conf import settings
from django.db import models

from lib.request_mapping import sent_body
from outbox.clock import DbClockDateTimeField, db_now, db_now_plus
from outbox.models.holds import INTENDED_KINDS, DestinationHold
from outbox.models.states import (
    DISPATCHER_STATES,
    HANDOFF_AGES,
    HANDOFF_TRANSITIONS,
    NEEDS_PERSON_STATES,
    OPEN_STATES,
    SETTLED_STATES,
    UNKNOWN_OUTCOME_CLASSES,
    WORK_DONE,
    WORK_FAILED,
    CompensationState,
    FailureClass,
    HandoffKind,
    HandoffState,
)
from outbox.page_clock import page_now

S = HandoffState


def work_failed_condition() -> models.Q:
    """Delivered steps whose work the receiver reports failed: the task exists, its work does not."""
    return models.Q(state=S.DELIVERED, work_status=WORK_FAILED)


def completing_case_condition() -> models.Q:
    """One row per completed case, its last step. A case (the workflow instance of one approved request
    revision) is complete when every step is delivered and its work reported done: the last step planned no
    further one, and no row of its instance is short of that (a step not done, a compensation)."""
    step_done = models.Q(kind=HandoffKind.ACTION, state=S.DELIVERED, work_status=WORK_DONE)
    short = Handoff.objects.filter(instance_key=models.OuterRef("instance_key")).exclude(step_done)
    return step_done & models.Q(plan=[]) & (models.Q(instance_key="") | ~models.Exists(short))


# The outer row's own values, for `earlier_of_its_key` as a subquery.
_OUTER_ROW = (
    models.OuterRef("destination"),
    models.OuterRef("order_key"),
    models.OuterRef("order_position"),
)


def earlier_of_its_key(
    destination=_OUTER_ROW[0], order_key=_OUTER_ROW[1], order_position=_OUTER_ROW[2]
):
    """An open row of the outer row's destination and ordering key approved before it (a lower
    `order_position`): while one is open, the outer row waits (`handoff_order_idx`). Given one row's values
    instead, the same rows for that row (the step's words on a page, `console/step_status.py`)."""
    return Handoff.objects.filter(
        destination=destination,
        order_key=order_key,
        order_position__lt=order_position,
        state__in=OPEN_STATES,
    ).exclude(order_key="")


# The product's own alert notifications ride the engine as handoffs of this workflow, keys `incident:…`
# (`incidents/channels/delivery.py`). They are no workspace's business: the handoff lists and Health count
# them apart (`HandoffQuerySet.business`), Health's alert-channel line shows their delivery.
NOTIFICATION_WORKFLOW = "incident_notifications"
# Names no business workflow may take: the notifications' own, and `incident`, the first part of their keys
# (a workflow's keys begin with its name). `approvals.services.rule_versions.reserved_name_problems`.
RESERVED_WORKFLOWS = frozenset({NOTIFICATION_WORKFLOW, "incident"})
# Every alert channel's destination is named so (`incidents.channels.delivery.channel_destination_name`): a
# backlog there is the channel's, not a workspace's, and neither backlog rule (the incident's, `/metrics`'s
# `handoff_oldest_due_age_seconds`) counts it.
CHANNEL_DESTINATION_PREFIX = "alert-channel-"


def business_condition(prefix: str = "") -> models.Q:
    """The workspaces' own handoffs: every one but the product's alert notifications. `prefix` is the path
    from another model to its handoff (`"handoff__"` for attempts and events)."""
    return ~models.Q(**{f"{prefix}workflow": NOTIFICATION_WORKFLOW})


class HandoffQuerySet(models.QuerySet):
    """The derived rules over handoffs, each defined once. Times are compared on the database clock."""

    def business(self):
        """The workspaces' own handoffs (`business_condition`)."""
        return self.filter(business_condition())

    def notifications(self):
        """The product's alert notifications (`NOTIFICATION_WORKFLOW`)."""
        return self.filter(workflow=NOTIFICATION_WORKFLOW)

    def security_notifications(self):
        """The alert notifications of security incidents (of no workspace: `workspace_id=0`), whose payload
        holds the incident's title and summary: shown only to holders of `incidents.view_security_incident`
        (`console/admin.py`; no workspace's scope holds 0, so the console's screens never list them)."""
        return self.notifications().filter(workspace_id=0)

    def due(self):
        """Pending, its time come, no operator holds its case (the claim index's condition), not before its
        not-before time, not past its must-finish-by (a step past it goes to a person instead:
        `handoffs_past_deadline`), and no earlier step of its ordering key open at its destination (a
        retried first one keeps its place). Rows with such times or keys are few; the index finds the rest."""
        now = db_now()
        return self.filter(
            state=S.PENDING, case_hold__isnull=True, next_attempt_at__lte=now
        ).filter(
            models.Q(not_before__isnull=True) | models.Q(not_before__lte=now),
            models.Q(finish_by__isnull=True) | models.Q(finish_by__gt=now),
            models.Q(order_key="") | ~models.Exists(earlier_of_its_key()),
        )

    def backlog(self):
        """The backlog rule's handoffs, read by the backlog incident (`incidents/causes.py`) and `/metrics`'
        `handoff_oldest_due_age_seconds` (HandoffPendingTooLong) alike, so the two never disagree: due ones
        (`due`, the claim's rule: no case hold, no earlier step of its key open), none of a destination an
        intended hold (`INTENDED_KINDS`: an operator's pause or window, a Retry-After wait) holds now, nor of
        an alert channel's (`CHANNEL_DESTINATION_PREFIX`: the channel's own figures and rule). Their age counts
        from `DestinationHold.objects.backlog_since`. The breaker's pause is no intended hold: its backlog
        stays here (the incident path leaves it to the pause's own incident, `destination:<name>:<why>`)."""
        held = DestinationHold.objects.live().filter(kind__in=INTENDED_KINDS).values("destination")
        return (
            self.due()
            .exclude(destination__in=held)
            .exclude(destination__startswith=CHANNEL_DESTINATION_PREFIX)
        )

    def past_deadline(self):
        """Pending and past its must-finish-by (database clock): never sent, a person decides."""
        return self.filter(state=S.PENDING, finish_by__lte=db_now())

    def left_to_send(self):
        """Open and not past its must-finish-by (database clock): what a hold of its case can still keep
        back. A step past it is never sent (`past_deadline`), so no hold covers it."""
        return self.open().exclude(finish_by__lte=db_now())

    def held(self):
        """Its case is held by an operator (`outbox/models/case_holds.py`), and it is open: a settled row still
        marked (its call under way at hold time delivered, or it was cancelled) is held no more."""
        return self.open().filter(case_hold__isnull=False)

    def lease_expired(self):
        return self.filter(state=S.IN_FLIGHT, lease_expires_at__lt=db_now())

    def retrying(self):
        """Pending after a failed attempt, waiting for its backoff to pass (`Handoff.in_backoff`, per row)."""
        return self.filter(state=S.PENDING, attempts__gt=0, next_attempt_at__gt=db_now())

    def open(self):
        return self.filter(state__in=OPEN_STATES)

    def work_failed(self):
        return self.filter(work_failed_condition())

    def completing_cases(self):
        return self.filter(completing_case_condition())

    def older_than(self, age_code: str):
        # created_at is written on the database clock, so the age is measured on it too.
        return self.filter(created_at__lt=db_now_plus(-HANDOFF_AGES[age_code][1].total_seconds()))


class Handoff(models.Model):
    action_key = models.CharField(max_length=200)
    # A workflow instance (one approved request revision) runs as one handoff per step, each with its own
    # key `<instance>:<step>`; a workflow of one step keeps the instance key itself.
    instance_key = models.CharField(
        max_length=200, blank=True, help_text="The workflow instance, e.g. onboarding:7:42:1."
    )
    step = models.CharField(
        max_length=60, blank=True, help_text="The logical step; blank for a one-step workflow."
    )
    step_index = models.PositiveSmallIntegerField(default=0)
    kind = models.CharField(max_length=16, choices=HandoffKind.choices, default=HandoffKind.ACTION)
    # What to record when this handoff is delivered, in the same transaction: the following steps (or, for
    # a compensation, the compensations of the earlier steps), each {"step", "operation", "compensation"}.
    plan = models.JSONField(default=list, blank=True)
    compensates = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="compensations",
        db_index=False,
    )
    compensation_state = models.CharField(
        max_length=12, choices=CompensationState.choices, blank=True
    )
    compensation_operation = models.CharField(
        max_length=60,
        blank=True,
        help_text="The operation that reverses this step; blank if nothing can.",
    )
    # The business outcome, owned by the people doing the task: the receiver task's status as last read back
    # through the destination (open, in_progress, done, failed). "Task created" is not "work done".
    work_status = models.CharField(max_length=16, blank=True)
    work_checked_at = models.DateTimeField(null=True, blank=True)
    # The receiver's own time of the stored work status, and the sequence of its newest status event applied:
    # an event with a lower sequence arrives late and changes nothing (`outbox/services/status_events.py`).
    work_reported_at = models.DateTimeField(null=True, blank=True)
    receiver_event_sequence = models.BigIntegerField(null=True, blank=True)
    # What the receiver last said about this key's task (True: it has it, False: it has none, None: not asked
    # since the receipt), when (database clock) and through what (a status event, a check by a person).
    task_seen = models.BooleanField(null=True, blank=True)
    task_checked_at = models.DateTimeField(null=True, blank=True)
    task_checked_by = models.CharField(max_length=120, blank=True, db_default="")
    receipt = models.JSONField(
        default=dict, blank=True, help_text="The validated receipt, as received."
    )
    workflow = models.CharField(max_length=40)
    workspace_id = models.PositiveIntegerField()  # indexed first in handoff_ws_keyset_idx
    source_ref = models.CharField(
        max_length=120, help_text="The source record, e.g. request 42 revision 1."
    )
    source_id = models.PositiveBigIntegerField(
        help_text="Primary key of the source request revision."
    )
    rule_version = models.CharField(max_length=40, blank=True)
    payload = models.JSONField()
    # Of what is sent: the payload, or the frozen request's body where there is one.
    payload_hash = models.CharField(max_length=64)
    # The request approved with the decision ({"body", "path", "query", "headers"}, lib/request_mapping.py),
    # frozen here and sent as it is; None: the route maps none and the payload is the body.
    request = models.JSONField(null=True, blank=True)
    destination = models.CharField(max_length=40, default="receiver")
    # What the console's and the admin's search find this handoff by (`outbox/search_text.py`): lower-cased
    # key, request reference and searchable payload values. A trigram index serves it on PostgreSQL
    # (migration 0024, built there only). Null for a row the release before wrote until the migration fills it.
    search_text = models.TextField(null=True, blank=True, editable=False)

    state = models.CharField(
        max_length=20, choices=HandoffState.choices, default=HandoffState.PENDING
    )
    attempts = models.PositiveIntegerField(
        default=0, help_text="Every attempt ever made; numbers the attempts."
    )
    attempts_in_run = models.PositiveIntegerField(
        default=0,
        help_text="Automatic attempts since the handoff was recorded or an operator retried it.",
    )
    # Of `attempts`, the ones that were not this handoff's own (issue 36, item 8): claims given back unsent
    # for a hold, and calls made as its destination's probe that failed (the destination's, not the
    # handoff's). A default in the database: the release before inserts rows without it.
    attempts_not_counted = models.PositiveIntegerField(default=0, db_default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    run_started_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Start of the retry window: when the handoff was recorded or an operator last retried it.",
    )

    # The lease: who holds the row, until when, and a fencing epoch that grows with every claim so
    # that an outcome from a worker whose lease was taken over is refused.
    lease_owner = models.CharField(max_length=120, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    fencing_epoch = models.PositiveBigIntegerField(default=0)

    destination_id = models.CharField(
        max_length=120, blank=True, help_text="Task id the receiver returned."
    )
    failure_class = models.CharField(max_length=16, choices=FailureClass.choices, blank=True)
    reason_code = models.CharField(max_length=60, blank=True)
    last_error = models.TextField(blank=True)

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    sla_due_at = models.DateTimeField(null=True, blank=True)
    attention_since = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )

    # Its subject's personal fields were erased on request (`outbox/services/erasure.py`): key, hashes and
    # receipt kept. No constraint (the table is hot); a partial index holds only the erased rows.
    erasure = models.ForeignKey(
        "outbox.Erasure",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )

    # A workflow step's business times, fixed at the approval (`outbox/steps.py` `step_times`): it is not sent
    # before `not_before`, and never after `finish_by` (then it goes to a person). Nullable: most have none.
    not_before = models.DateTimeField(null=True, blank=True)
    finish_by = models.DateTimeField(null=True, blank=True)
    # Order per business entity (issue 39): a step whose route declares "order_by" carries the payload's value
    # of that field; its destination receives the open steps of one key in approval order (`order_position`:
    # the id of its instance's first row), the claim leaving a row out while an earlier one of its key is open.
    order_key = models.CharField(max_length=200, blank=True, default="", db_default="")
    order_position = models.BigIntegerField(null=True, blank=True)
    # The operator's hold of its case while it holds (`outbox/models/case_holds.py`): the claim leaves it out.
    # Nullable, no constraint: the release before inserts rows without it, and the table is hot.
    case_hold = models.ForeignKey(
        "outbox.CaseHold",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )

    created_at = DbClockDateTimeField(auto_now_add=True)
    updated_at = DbClockDateTimeField(auto_now=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = HandoffQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["action_key"], name="handoff_unique_action_key"),
        ]
        # Rows in a working state are few; delivered ones pile up for ever. Every state change rewrites the row
        # (state is indexed, so no HOT update) and adds an entry to every full index, so the indexes that only
        # the dispatcher and the console's state lists read are partial: a row leaves them when it leaves the
        # states they cover, and they stay small however many rows are delivered. A query reaches a partial
        # index only when its WHERE implies the index's condition (`HandoffQuerySet` writes them so).
        indexes = [
            # The claim (`HandoffQuerySet.due`, per destination): due pending rows, oldest due first; a held
            # case's rows are not in it, so the claim skips them without reading them.
            models.Index(
                fields=["destination", "next_attempt_at", "id"],
                name="handoff_claim_unheld_idx",
                condition=models.Q(state=S.PENDING, case_hold__isnull=True),
            ),
            # An earlier open row of the same destination and ordering key (`earlier_of_its_key`).
            models.Index(
                fields=["destination", "order_key", "order_position"],
                name="handoff_order_idx",
                condition=models.Q(state__in=sorted(OPEN_STATES)) & ~models.Q(order_key=""),
            ),
            # The deadline sweep (`HandoffQuerySet.past_deadline`): pending steps with a must-finish-by.
            models.Index(
                fields=["finish_by"],
                name="handoff_deadline_idx",
                condition=models.Q(state=S.PENDING, finish_by__isnull=False),
            ),
            # The rows of a held case, found by their hold to resume them.
            models.Index(
                fields=["case_hold"],
                name="handoff_case_hold_idx",
                condition=models.Q(case_hold__isnull=False),
            ),
            # The rows an erasure marked, found by it (what one erasure touched); only erased rows are in it.
            models.Index(
                fields=["erasure"],
                name="handoff_erasure_idx",
                condition=models.Q(erasure__isnull=False),
            ),
            # Expired leases (`HandoffQuerySet.lease_expired`).
            models.Index(
                fields=["lease_expires_at"],
                name="handoff_lease_expiry_idx",
                condition=models.Q(state=S.IN_FLIGHT),
            ),
            # Settlement of unknown outcomes, longest unsettled first (`dispatcher.settle_uncertain`).
            models.Index(
                fields=["updated_at"],
                name="handoff_uncertain_idx",
                condition=models.Q(state=S.UNCERTAIN),
            ),
            # Console lists: keyset pagination, per workspace.
            models.Index(fields=["workspace_id", "created_at", "id"], name="handoff_ws_keyset_idx"),
            # Every state but delivered, which the keyset index serves as well as the bulk of the rows: the
            # console's state lists and the header's count of handoffs needing a person (per workspace, newest
            # first), and the reads of one state across workspaces (alerts, /metrics, the health page).
            models.Index(
                fields=["state", "workspace_id", "created_at", "id"],
                name="handoff_state_open_idx",
                condition=~models.Q(state=S.DELIVERED),
            ),
            # The header's count of a workspace's handoffs needing a person, on every page (reconciliation's
            # `needing_person_counts_bounded`): the workspaces' own handoffs only (`business_condition`). The
            # state index above cannot answer the workflow, so each of its entries sent PostgreSQL to the row,
            # and on a vacuumed outbox it read the table from the start instead (6-25 ms a page at 1,000,000
            # handoffs); this one is read alone (an index-only scan, 0.2 ms).
            models.Index(
                fields=["workspace_id"],
                name="handoff_needs_person_idx",
                condition=models.Q(state__in=sorted(NEEDS_PERSON_STATES)) & business_condition(),
            ),
            # Health's line of the alert channels (incidents' `alert_channel_delivery`, on every health page, not
            # cached): the product's open alert notifications, by workspace and channel. Through the open-state
            # index it read every open handoff of the workspaces to find the few notifications among them
            # (85 ms, 14,800 buffers at the console bench's 90,000 open of a workspace).
            models.Index(
                fields=["workspace_id", "destination"],
                name="handoff_open_notifications_idx",
                condition=models.Q(state__in=sorted(OPEN_STATES), workflow=NOTIFICATION_WORKFLOW),
            ),
            # The console's "retrying" list (`HandoffQuerySet.retrying`): pending after a failed attempt, newest
            # first. The due time is a key too, so the index itself skips the rows whose backoff has passed: the
            # planner then prefers it to range-scanning the claim index over every row in backoff and sorting.
            models.Index(
                fields=["workspace_id", "created_at", "id", "next_attempt_at"],
                name="handoff_retrying_idx",
                condition=models.Q(state=S.PENDING, attempts__gt=0),
            ),
            # Console search by request number ("request 42 …" prefix) and reconciliation's source check.
            models.Index(
                fields=["source_ref"],
                name="handoff_source_ref_idx",
                opclasses=["varchar_pattern_ops"],
            ),
            models.Index(fields=["source_id"], name="handoff_source_id_idx"),
            models.Index(fields=["instance_key", "step_index"], name="handoff_instance_idx"),
            # Rarely set references (an owner, an acknowledgement, the step a compensation reverses): indexed only
            # where set, so that the millions of rows without one (every delivered handoff) are not in them.
            # Every claim and outcome writes a new row version and so an entry in every full index.
            models.Index(
                fields=["owner"], name="handoff_owner_idx", condition=models.Q(owner__isnull=False)
            ),
            models.Index(
                fields=["acknowledged_by"],
                name="handoff_acknowledged_by_idx",
                condition=models.Q(acknowledged_by__isnull=False),
            ),
            models.Index(
                fields=["compensates"],
                name="handoff_compensates_idx",
                condition=models.Q(compensates__isnull=False),
            ),
            # Retention (`outbox/services/retention.py`): settled rows, oldest change first. Rows leave it when
            # they are archived, so it holds the retention window's settled rows, not every one ever.
            models.Index(
                fields=["updated_at", "id"],
                name="handoff_settled_idx",
                condition=models.Q(state__in=SETTLED_STATES),
            ),
            # The health dashboard's figures of failures and their acknowledgement (measured at 10,000,000
            # handoffs, docs/benchmarks.md), each over the few rows it is about rather than a workspace's whole
            # needs-attention backlog: retries exhausted among those needing attention, the ones nobody has
            # acknowledged yet (how many, the oldest), and the acknowledged failures of the last 30 days.
            models.Index(
                fields=["workspace_id", "reason_code"],
                name="handoff_attention_reason_idx",
                condition=models.Q(state=S.NEEDS_ATTENTION),
            ),
            # The workspaces' own only (`business_condition`, as the health page asks): with the workflow
            # outside the condition each entry sent PostgreSQL to the row, 140-180 ms at the console bench's
            # 45,000 unacknowledged of a workspace against 4 ms read from the index alone.
            models.Index(
                fields=["workspace_id", "attention_since"],
                name="handoff_unacknowledged_idx",
                condition=models.Q(state=S.NEEDS_ATTENTION, acknowledged_at__isnull=True)
                & business_condition(),
            ),
            models.Index(
                fields=["workspace_id", "attention_since"],
                name="handoff_acknowledged_idx",
                condition=models.Q(acknowledged_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action_key} ({self.state})"

    def can_move_to(self, state: str) -> bool:
        return state in HANDOFF_TRANSITIONS[self.state]

    @property
    def sent_body(self) -> dict:
        """The JSON body its destination receives: the frozen request's, else the payload."""
        return sent_body(self.request, self.payload)

    @property
    def attempts_made(self) -> int:
        """The attempts that were this handoff's own, as screens count them: not a send skipped for a
        hold, not a probe of its destination."""
        return max(self.attempts - (self.attempts_not_counted or 0), 0)

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def is_held(self) -> bool:
        """An operator holds its case: nothing of it is claimed or sent until resumed. A settled row is not
        held, though its mark stays until the sweep ends a hold with nothing left (`case_holds_expire`)."""
        return self.case_hold_id is not None and self.is_open

    # What templates ask of a handoff (a template never spells a state's name).
    @property
    def is_delivered(self) -> bool:
        return self.state == S.DELIVERED

    @property
    def needs_attention(self) -> bool:
        return self.state == S.NEEDS_ATTENTION

    @property
    def is_compensation(self) -> bool:
        return self.kind == HandoffKind.COMPENSATION

    @property
    def work_done(self) -> bool:
        """The receiver reported the task's work done (a delivered handoff only proves the task exists)."""
        return self.work_status == WORK_DONE

    @property
    def work_done_by_delivery(self) -> bool:
        """Its work was done by delivering it (a destination whose effect is the work, such as an e-mail
        sent: `work_status` "delivered"), recorded with the delivery, not reported after it."""
        return (
            self.work_done
            and self.work_reported_at is None
            and self.work_checked_at is not None
            and self.work_checked_at == self.delivered_at
        )

    @property
    def retry_scheduled(self) -> bool:
        """Pending after a failed attempt, with its next attempt set (`in_backoff` also asks that it is later
        than now)."""
        return self.state == S.PENDING and self.attempts > 0 and self.next_attempt_at is not None

    @property
    def with_dispatcher(self) -> bool:
        return self.state in DISPATCHER_STATES

    @property
    def cancellable_alone(self) -> bool:
        """Only a workflow's first step (or a one-step handoff) is cancelled alone. Cancelling a later step, or a
        compensation, would leave the workflow half done or half reversed with nobody asked to finish it: the
        workflow is compensated instead, and a compensation that cannot go through gets a manual repair."""
        return self.kind == HandoffKind.ACTION and self.step_index == 0

    @property
    def correctable_alone(self) -> bool:
        """A correction is a new request revision, whose approval runs the workflow again from its first step
        under new keys. A later step's predecessors were delivered (it was recorded when they were), so
        correcting it would do them twice: that workflow is compensated instead. The same rows as
        `cancellable_alone`: a workflow's first step or a one-step handoff."""
        return self.cancellable_alone

    @property
    def in_backoff(self) -> bool:
        """`HandoffQuerySet.retrying` for a row already read: its next attempt is later than now on the database
        clock that wrote it (`page_now`: no query per row)."""
        return self.retry_scheduled and self.next_attempt_at > page_now()

    @property
    def outcome_unknown(self) -> bool:
        """Nobody knows whether the receiver has its task: uncertain (settlement may still find out), or
        `awaits_receiver_check`. Sending it again may create a second effect, so a retry asks to confirm."""
        return self.state == S.UNCERTAIN or self.awaits_receiver_check

    @property
    def awaits_receiver_check(self) -> bool:
        """Needs attention after an answer that proved nothing (no valid receipt, or the receiver could not be
        asked): nothing automatic settles it; a person checks at the receiver and records what is there."""
        return self.state == S.NEEDS_ATTENTION and self.failure_class in UNKNOWN_OUTCOME_CLASSES

    @property
    def manual_settle_applies(self) -> bool:
        """A person's check at the receiver can settle it: delivered, or `awaits_receiver_check`."""
        return self.state == S.DELIVERED or self.awaits_receiver_check
