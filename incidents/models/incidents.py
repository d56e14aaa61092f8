"""Incidents: failures grouped by cause, the channels that page about them, and the notifications sent.

An on-call person meets one cause once: every handoff, finding, rejected trigger or security event that
shares a cause (a destination paused; the same destination, failure class, reason, rule version and step;
findings of one kind; one kind of security event; triggers rejected for one workflow) is a member of one
incident, which pages once and resolves by itself when its cause is gone and every member is settled.

A notification is a side effect like a handoff: it has a stable id (the incident and the notification's
number) that a receiver of alerts sees again on a resend, and it is retried with backoff within a window;
one that could not be sent stays visible (`NotificationState.FAILED`). It is delivered as a handoff by the
outbox's engine (`incidents/channels/delivery.py`).
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from outbox.models import Handoff, HandoffEvent, HandoffState
from reconciliation.models import lifecycle


class IncidentKind(models.TextChoices):
    DESTINATION = "destination", "Destination paused"
    FAILURES = "failures", "Handoffs failing for one cause"
    FINDINGS = "findings", "Reconciliation findings"
    SECURITY = "security", "Security events"
    REJECTED_TRIGGERS = "rejected_triggers", "Triggers rejected at intake"
    BACKLOG = "backlog", "A destination's queue growing while nothing fails"


# Kinds whose cause is a condition of the system (a pause, a backlog): the incident resolves when the
# condition ends, whatever its members. The others resolve once the cause is gone and every member is settled.
CONDITION_KINDS = frozenset({IncidentKind.DESTINATION, IncidentKind.BACKLOG})


class IncidentSeverity(models.TextChoices):
    # Pages someone now (outage, corruption, security, a high-impact step, many at once).
    PAGE = "page", "Page"
    # A queue with an owner and an SLA: nobody is woken up.
    QUEUE = "queue", "Queue with an SLA"


# An incident's lifecycle is the one findings share (`lifecycle.py`). A resolved incident whose cause comes
# back is a new incident; an acknowledgement that lapses while the cause holds moves it back to open, and
# it pages again.
IncidentState = lifecycle.LifecycleState

# Who sees the incidents of no workspace (security events), with their members and notifications.
SECURITY_INCIDENTS_PERMISSION = "incidents.view_security_incident"


class IncidentQuerySet(lifecycle.LifecycleQuerySet):
    def visible_to(self, workspace_ids, *, include_unscoped: bool = False, owner_id=None):
        """Incidents of these workspaces; with `include_unscoped` (a holder of
        `SECURITY_INCIDENTS_PERMISSION`) also those of no workspace (security events); and those `owner_id`
        owns (the fallback on-call of a workspace without an operator)."""
        condition = Q(workspace_id__in=list(workspace_ids))
        if include_unscoped:
            condition |= Q(workspace_id__isnull=True)
        if owner_id is not None:
            condition |= Q(owner_id=owner_id)
        return self.filter(condition)


class Incident(lifecycle.AcknowledgedResolved):
    acknowledgement_lapses = True

    cause = models.CharField(
        max_length=200, help_text="What groups the members: one live per cause."
    )
    # A cause seen in two workspaces is two incidents: each workspace's people read and act on their own.
    # None: a cause of no workspace (security events), shown to holders of SECURITY_INCIDENTS_PERMISSION.
    workspace_id = models.PositiveIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=20, choices=IncidentKind.choices)
    severity = models.CharField(max_length=8, choices=IncidentSeverity.choices)
    state = models.CharField(
        max_length=16, choices=IncidentState.choices, default=IncidentState.OPEN
    )
    title = models.CharField(max_length=300)
    destination = models.CharField(max_length=40, blank=True)
    failure_class = models.CharField(max_length=40, blank=True)
    reason_code = models.CharField(max_length=60, blank=True)
    workflow = models.CharField(max_length=40, blank=True)
    step = models.CharField(max_length=40, blank=True)
    rule_version = models.CharField(max_length=40, blank=True)
    high_impact = models.BooleanField(default=False, db_default=False)
    member_count = models.PositiveIntegerField(default=0, db_default=0)
    settled_count = models.PositiveIntegerField(default=0, db_default=0)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    sla_due_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(db_default=Now())
    last_seen_at = models.DateTimeField(db_default=Now())
    # Escalation: pages sent so far (1 = the first page), and when the next is due without an
    # acknowledgement (written and compared on the database clock; None: nothing more to send).
    pages_sent = models.PositiveSmallIntegerField(default=0, db_default=0)
    next_escalation_at = models.DateTimeField(null=True, blank=True)
    # Nothing is sent before this (database clock): a cause that ends within the delay of its severity
    # (ALERT_NOTIFY_DELAY_SECONDS) tells nobody. None: at once.
    notify_after = models.DateTimeField(null=True, blank=True)
    # An acknowledgement holds until then; if the cause still holds, the incident is open and pages again.
    ack_lapses_at = models.DateTimeField(null=True, blank=True)
    # What the cause was, kept once it is over: when it started, its first and its latest evidence (the
    # answer, the credential, the time), so that a resolved incident still says what happened.
    cause_since = models.DateTimeField(null=True, blank=True)
    evidence_first = models.TextField(blank=True, default="", db_default="")
    evidence_last = models.TextField(blank=True, default="", db_default="")

    objects = IncidentQuerySet.as_manager()

    class Meta:
        db_table = "reconciliation_incident"
        # Security incidents (of no workspace: `workspace_id` empty) are shown to its holders only, on every
        # screen (`SECURITY_INCIDENTS_PERMISSION`); no group holds it, and support grants it by hand.
        permissions = [
            ("view_security_incident", "Can view security incidents (they belong to no workspace)")
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["cause", "workspace_id"],
                condition=~Q(state="resolved") & Q(workspace_id__isnull=False),
                name="incident_one_live_per_cause_ws",
            ),
            # NULLs are distinct in a unique index: the causes of no workspace get their own.
            models.UniqueConstraint(
                fields=["cause"],
                condition=~Q(state="resolved") & Q(workspace_id__isnull=True),
                name="incident_one_live_per_cause_unscoped",
            ),
        ]
        indexes = [
            models.Index(fields=["state", "opened_at"], name="incident_state_idx"),
            models.Index(fields=["workspace_id", "state"], name="incident_workspace_idx"),
            models.Index(
                fields=["next_escalation_at"],
                name="incident_escalation_idx",
                condition=Q(next_escalation_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"incident {self.pk}: {self.title} ({self.state})"

    @property
    def dedup_key(self) -> str:
        """The key every notification about this incident carries (PagerDuty's dedup_key)."""
        return f"handoff-incident-{self.pk}"

    @property
    def workspace_ids(self) -> list[int]:
        """Its workspace, as the list the channel and policy reads take; none for a cause of no workspace."""
        return [] if self.workspace_id is None else [self.workspace_id]

    @property
    def pages(self) -> bool:
        return self.severity == IncidentSeverity.PAGE

    @property
    def resolves_with_its_condition(self) -> bool:
        return self.kind in CONDITION_KINDS


class IncidentMember(models.Model):
    """One handoff, finding, rejected trigger or security event grouped into an incident. Plain ids, as
    findings keep them: the incident outlives the rows it is about."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="members")
    member_key = models.CharField(max_length=60, help_text="handoff:<id>, finding:<id>, ...")
    handoff_id = models.BigIntegerField(null=True, blank=True)
    finding_id = models.BigIntegerField(null=True, blank=True)
    trigger_id = models.BigIntegerField(null=True, blank=True)
    security_event_id = models.BigIntegerField(null=True, blank=True)
    workspace_id = models.PositiveIntegerField(null=True, blank=True)
    action_key = models.CharField(max_length=200, blank=True)
    added_at = models.DateTimeField(db_default=Now())
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "reconciliation_incidentmember"
        constraints = [
            models.UniqueConstraint(
                fields=["incident", "member_key"], name="incident_member_unique"
            ),
        ]
        indexes = [
            models.Index(fields=["incident", "settled_at"], name="incident_member_settled_idx"),
            models.Index(fields=["workspace_id", "incident"], name="incident_member_ws_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.member_key} in incident {self.incident_id}"

    @property
    def is_settled(self) -> bool:
        return self.settled_at is not None


class IncidentEvent(lifecycle.LifecycleEvent):
    """The incident's timeline: opened, paged, escalated, acknowledged, resolved, a notification failed."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(max_length=30)
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16, blank=True)
    at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "reconciliation_incidentevent"
        indexes = [models.Index(fields=["incident", "at"], name="incident_event_idx")]

    def __str__(self) -> str:
        return f"incident {self.incident_id}: {self.action} by {self.actor_label}"


class ChannelKind(models.TextChoices):
    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Signed webhook (Standard Webhooks)"
    SLACK = "slack", "Slack-compatible incoming webhook"
    PAGERDUTY = "pagerduty", "PagerDuty Events API v2"


class AlertChannel(models.Model):
    """Where a workspace's incidents go, by severity and escalation level. The secret (a webhook's signing
    secret, PagerDuty's routing key) is named, never stored: `secret_env` is an environment variable."""

    workspace_id = models.PositiveIntegerField(
        null=True, blank=True, help_text="None: the on-call team of every workspace."
    )
    name = models.CharField(max_length=60)
    kind = models.CharField(max_length=12, choices=ChannelKind.choices)
    target = models.CharField(max_length=300, help_text="An e-mail address or a URL.")
    secret_env = models.CharField(max_length=80, blank=True)
    severity = models.CharField(
        max_length=8,
        choices=IncidentSeverity.choices,
        default=IncidentSeverity.PAGE,
        help_text="Page: pages only; queue: every incident.",
    )
    level = models.PositiveSmallIntegerField(
        default=0, help_text="Escalation level: 0 gets the first page, 1 the next, ..."
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        db_table = "reconciliation_alertchannel"
        constraints = [
            models.UniqueConstraint(fields=["workspace_id", "name"], name="alert_channel_name"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} channel {self.name}"


class EscalationPolicyQuerySet(models.QuerySet):
    def for_workspaces(self, workspaces: list[int]) -> tuple[int, int]:
        """(seconds to wait for an acknowledgement, most pages): the strictest policy of the incident's
        workspaces (the shortest wait; of equal waits the most pages), else the every-workspace policy row,
        else the settings. Chosen here, not by the database's order of NULLs (first on SQLite, last on
        PostgreSQL): at most one row a workspace and one for every workspace."""
        rows = list(self.filter(Q(workspace_id__in=workspaces) | Q(workspace_id__isnull=True)))
        own = [row for row in rows if row.workspace_id is not None]
        if own:
            policy = min(own, key=lambda r: (r.ack_timeout_seconds, -r.max_pages, r.workspace_id))
        elif rows:
            policy = rows[0]
        else:
            return settings.ALERT_ESCALATION_SECONDS, settings.ALERT_ESCALATION_MAX_PAGES
        return policy.ack_timeout_seconds, policy.max_pages


class EscalationPolicy(models.Model):
    """How long a page waits for an acknowledgement before the next level, and how many pages at most."""

    workspace_id = models.PositiveIntegerField(null=True, blank=True, unique=True)
    ack_timeout_seconds = models.PositiveIntegerField(default=900)
    max_pages = models.PositiveSmallIntegerField(default=4)

    objects = EscalationPolicyQuerySet.as_manager()

    class Meta:
        db_table = "reconciliation_escalationpolicy"

    def __str__(self) -> str:
        return f"escalation policy of workspace {self.workspace_id}"


class NotificationState(models.TextChoices):
    PENDING = "pending", "Pending"
    RETRYING = "retrying", "Retrying (an attempt failed)"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed (retries exhausted)"
    # A page withdrawn at the moment it would have gone out (database clock): never sent. Why (its cause had
    # ended, or an operator holds its failure) is the withdrawal's own (`Notification.delivery_label`).
    WITHDRAWN = "dropped", "Withdrawn before it went out"


# How the send step words a withdrawal on the handoff's event (`outbox/dispatch/withdrawals.py`).
WITHDRAWN_PREFIX = "withdrawn: "

# A notification's state, from its handoff's: delivered is sent, a person's (retries exhausted, an unknown
# outcome nobody could settle) is failed, cancelled is withdrawn (`outbox/dispatch/withdrawals.py`).
HANDOFF_TO_NOTIFICATION = {
    HandoffState.DELIVERED: NotificationState.SENT,
    HandoffState.NEEDS_ATTENTION: NotificationState.FAILED,
    HandoffState.CANCELLED: NotificationState.WITHDRAWN,
}


class NotificationQuerySet(models.QuerySet):
    def with_delivery(self):
        """Annotated `delivery_state` (a NotificationState), `delivery_attempts` and `delivery_error`: read
        from the notification's handoff, which the outbox's engine delivers (`incidents/channels/delivery.py`);
        a notification queued before that (no handoff) keeps its own `state`."""
        handoff = Handoff.objects.filter(pk=models.OuterRef("handoff_id"))
        return self.annotate(
            handoff_state=models.Subquery(handoff.values("state")[:1]),
            delivery_attempts=models.Subquery(handoff.values("attempts")[:1]),
            delivery_error=models.Subquery(handoff.values("last_error")[:1]),
            delivery_state=models.Case(
                models.When(handoff_id__isnull=True, then=models.F("state")),
                *(
                    models.When(handoff_state=state, then=models.Value(shown))
                    for state, shown in HANDOFF_TO_NOTIFICATION.items()
                ),
                models.When(delivery_attempts__gt=0, then=models.Value(NotificationState.RETRYING)),
                default=models.Value(NotificationState.PENDING),
                output_field=models.CharField(),
            ),
        )

    def failed(self):
        return self.with_delivery().filter(delivery_state=NotificationState.FAILED)

    def with_withdrawal(self):
        """`with_delivery`, and `withdrawn_because`: the reason its handoff was withdrawn with
        (`notification_send_check`'s answer, on the handoff's cancelling event); None when it was not."""
        withdrawal = HandoffEvent.objects.filter(
            handoff_id=models.OuterRef("handoff_id"),
            to_state=HandoffState.CANCELLED,
            reason__startswith=WITHDRAWN_PREFIX,
        ).order_by("-pk")
        return self.with_delivery().annotate(
            withdrawn_because=models.Subquery(withdrawal.values("reason")[:1])
        )


class NotificationEvent(models.TextChoices):
    TRIGGER = "trigger", "Page"
    ACKNOWLEDGE = "acknowledge", "Acknowledged"
    RESOLVE = "resolve", "Resolved"


class Notification(models.Model):
    """One message about an incident to one channel. `message_id` is the incident and the notification's
    number: the same on every resend, so a receiver that sees it twice can tell."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="notifications")
    channel = models.ForeignKey(AlertChannel, on_delete=models.PROTECT, related_name="+")
    number = models.PositiveSmallIntegerField()
    event = models.CharField(max_length=12, choices=NotificationEvent.choices)
    message_id = models.CharField(max_length=80)
    state = models.CharField(
        max_length=8, choices=NotificationState.choices, default=NotificationState.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(db_default=Now())
    next_attempt_at = models.DateTimeField(db_default=Now())
    sent_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=40, blank=True)
    last_error = models.TextField(blank=True)
    # The handoff that delivers it (`incidents/channels/delivery.py`): its state is the notification's
    # (`NotificationQuerySet.with_delivery`). None: queued before notifications rode the outbox's engine.
    handoff_id = models.BigIntegerField(null=True, blank=True)

    objects = NotificationQuerySet.as_manager()

    class Meta:
        db_table = "reconciliation_notification"
        constraints = [
            models.UniqueConstraint(
                fields=["message_id", "channel"], name="notification_unique_per_channel"
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="notification_due_idx",
                condition=Q(state="pending"),
            ),
            models.Index(fields=["incident", "number"], name="notification_incident_idx"),
        ]

    def __str__(self) -> str:
        return f"notification {self.message_id} to {self.channel_id} ({self.state})"

    @property
    def delivery_label(self) -> str:
        """Its state in words: its handoff's where read (`with_delivery`), else its own; a withdrawal with
        its reason where read (`with_withdrawal`)."""
        label = NotificationState(getattr(self, "delivery_state", self.state)).label
        because = getattr(self, "withdrawn_because", None)
        return f"{label}: {because.removeprefix(WITHDRAWN_PREFIX)}" if because else label
