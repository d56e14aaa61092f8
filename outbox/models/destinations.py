"""A destination's circuit breaker, the limits its operator set, their history, and the slots that enforce
the limits across every dispatcher."""

from django.conf import settings
from django.db import models
from django.db.models.functions import Coalesce

from outbox.clock import DbClockDateTimeField
from outbox.models.holds import DestinationHold, HoldKind
from outbox.models.states import DESTINATION_TRANSITIONS, DestinationState, PauseReason, SlotKind


def default_max_concurrency() -> int | None:
    """The concurrency limit a destination gets when it is first seen (HANDOFF_DESTINATION_MAX_CONCURRENCY)."""
    return settings.HANDOFF_DESTINATION_MAX_CONCURRENCY


def default_max_requests_per_second() -> int | None:
    """The rate limit a destination gets when it is first seen (HANDOFF_DESTINATION_MAX_REQUESTS_PER_SECOND)."""
    return settings.HANDOFF_DESTINATION_MAX_REQUESTS_PER_SECOND


# The reason the old columns named for each of the breaker's hold kinds: kept as the incidents' cause
# (`destination:<name>:<reason>`), so that an incident opened before this release stays the same cause. A hold
# that names its own (`DestinationHold.pause_reason`: its token endpoint's outage) says that one instead.
PAUSE_REASON_OF_HOLD = {
    HoldKind.BREAKER: PauseReason.UNREACHABLE,
    HoldKind.CREDENTIAL: PauseReason.CREDENTIAL,
    HoldKind.UNSERVABLE: PauseReason.UNSERVABLE,
}


class DestinationHealthQuerySet(models.QuerySet):
    def with_window(self):
        """Annotated `in_window`: an operator's hold (a pause or a maintenance window) is live now, on the
        database clock. One EXISTS on the holds' partial index."""
        live = (
            DestinationHold.objects.live()
            .by_operators()
            .filter(destination=models.OuterRef("name"))
        )
        return self.annotate(in_window=models.Exists(live))

    def with_retry_after(self):
        """Annotated with the live Retry-After hold (a `DestinationHold` row), if any: `hold_until`,
        `hold_since`, `hold_reason` (the latest end first), and `held`: there is one."""
        rows = (
            DestinationHold.objects.live()
            .filter(destination=models.OuterRef("name"), kind=HoldKind.RETRY_AFTER)
            .order_by("-ends_at", "pk")
        )
        return self.annotate(
            hold_until=models.Subquery(rows.values("ends_at")[:1]),
            hold_since=models.Subquery(rows.values("starts_at")[:1]),
            hold_reason=Coalesce(models.Subquery(rows.values("reason")[:1]), models.Value("")),
        ).annotate(
            held=models.ExpressionWrapper(
                models.Q(hold_until__isnull=False), output_field=models.BooleanField()
            )
        )

    def with_breaker(self):
        """Annotated from the breaker's live hold (`DestinationHold.objects.of_breaker()`, the latest if
        several): `breaker_kind` (None: its breaker does not pause it), `breaker_reason` (the hold's reason),
        `breaker_cause` (the hold's `pause_reason`), `breaker_since` (its start). One query for a whole list;
        the model's `paused_by_breaker`, `breaker_pause_reason` and `breaker_since` read these."""
        rows = (
            DestinationHold.objects.of_breaker()
            .filter(destination=models.OuterRef("name"))
            .order_by("-starts_at", "-pk")
        )
        return self.annotate(
            breaker_kind=models.Subquery(rows.values("kind")[:1]),
            breaker_reason=models.Subquery(rows.values("reason")[:1]),
            breaker_cause=models.Subquery(rows.values("pause_reason")[:1]),
            breaker_since=models.Subquery(rows.values("starts_at")[:1]),
        )

    def paused_by_breaker(self):
        """Destinations paused by their breaker now (a live hold of the breaker's, database clock)."""
        return self.with_breaker().filter(breaker_kind__isnull=False)

    def held_back(self):
        """Destinations that take no calls now: paused by their breaker, or held by an operator."""
        breaker = DestinationHold.objects.of_breaker().filter(destination=models.OuterRef("name"))
        return self.with_window().filter(models.Exists(breaker) | models.Q(in_window=True))


class DestinationHealth(models.Model):
    """The circuit breaker of one destination, and the limits its operator set. An outage is the destination's
    problem, not each handoff's: while it is paused (its hold, a `DestinationHold` until a probe succeeds) no
    handoff spends an attempt on it; one probe call at a time tests it, on the schedule kept here. The limits
    and the holds are enforced by `outbox/services/limits.py` across every dispatcher."""

    name = models.CharField(max_length=40)
    # Release one of moving the breaker's pause to its holds (docs/operations.md, "Rolling deploys"): the
    # breaker still writes `state`, `pause_reason` and `paused_at` (a dispatcher of the previous release
    # reads them) but nothing of this release reads them: "paused by its breaker", why and since when are
    # its live hold (`DestinationHold.objects.of_breaker()`, `with_breaker`, `paused_by_breaker`).
    state = models.CharField(
        max_length=10, choices=DestinationState.choices, default=DestinationState.ACTIVE
    )
    pause_reason = models.CharField(max_length=16, choices=PauseReason.choices, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="First failure of the current run."
    )
    paused_at = models.DateTimeField(null=True, blank=True)
    next_probe_at = models.DateTimeField(null=True, blank=True, help_text="On the database clock.")
    probes = models.PositiveIntegerField(default=0, help_text="Probe calls since the pause.")
    last_error = models.TextField(blank=True)
    # Operator-set limits (empty = unlimited).
    max_concurrency = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=default_max_concurrency,
        help_text="Calls in flight at once, across every dispatcher; empty = unlimited.",
    )
    max_requests_per_second = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=default_max_requests_per_second,
        help_text="Requests that reach the receiver in any one second; empty = unlimited.",
    )
    # The Retry-After hold, an operator's pause and a maintenance window are `DestinationHold` rows; the
    # columns that held them (hold_*, window_*) left the model in 0027 and the table in 0031
    # (docs/operations.md, "Rolling deploys").
    # The last connection test asked of it, on the database clock: tests are one per
    # CONNECTION_TEST_EVERY_SECONDS per destination, whoever asks and from whichever process.
    connection_tested_at = models.DateTimeField(null=True, blank=True)
    updated_at = DbClockDateTimeField(auto_now=True)

    objects = DestinationHealthQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name"], name="destination_health_unique_name")
        ]
        # Limits bind every workspace's deliveries, so an operator role in one workspace is not enough to set
        # them (console/views/health.py::destination_limits asks for both).
        permissions = [
            (
                "set_destination_limits",
                "Can set a destination's limits (they apply to every workspace)",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def can_move_to(self, state: str) -> bool:
        return state in DESTINATION_TRANSITIONS[self.state]

    @classmethod
    def not_seen(cls, name: str) -> "DestinationHealth":
        """A destination with no row yet, as a list shows it: nothing of the breaker's holds it (no query)."""
        health = cls(name=name)
        health.breaker_kind = health.breaker_reason = health.breaker_cause = None
        health.breaker_since = None
        return health

    def breaker_read(self) -> None:
        """The breaker's live hold, unless `with_breaker` annotated it: one query for a single row."""
        if hasattr(self, "breaker_kind"):
            return
        hold = (
            DestinationHold.objects.using(self._state.db)
            .of_breaker()
            .filter(destination=self.name)
            .order_by("-starts_at", "-pk")
            .first()
        )
        self.breaker_kind = hold.kind if hold else None
        self.breaker_reason = hold.reason if hold else None
        self.breaker_cause = hold.pause_reason if hold else None
        self.breaker_since = hold.starts_at if hold else None

    @property
    def paused_by_breaker(self) -> bool:
        """A live hold of the breaker's holds it (not the `state` column: old dispatchers' only)."""
        self.breaker_read()
        return self.breaker_kind is not None

    @property
    def breaker_pause_reason(self) -> str:
        """Why its breaker pauses it (`PauseReason`): its hold's own, else its kind's; "" when it does not."""
        self.breaker_read()
        if self.breaker_kind is None:
            return ""
        return self.breaker_cause or PAUSE_REASON_OF_HOLD.get(self.breaker_kind, "")

    @property
    def breaker_pause_words(self) -> str:
        """Its pause reason's words within a sentence ("unreachable (connection failures or 5xx)"; "token
        endpoint unavailable (the API was not called)"); "" when its breaker does not pause it."""
        if not self.breaker_pause_reason:
            return ""
        label = str(PauseReason(self.breaker_pause_reason).label)
        return label[:1].lower() + label[1:]


class DestinationEvent(models.Model):
    """Every pause and resume of a destination, and every change of its limits: who or what, when, from, to,
    why."""

    destination = models.CharField(max_length=40)
    from_state = models.CharField(max_length=10)
    to_state = models.CharField(max_length=10)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(
        max_length=120, blank=True, help_text="A user name, or blank for the dispatcher."
    )
    action = models.CharField(
        max_length=30, blank=True, help_text="Operator action, if any (set_limits)."
    )
    reason = models.TextField(blank=True)
    at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["destination", "at"], name="destination_event_idx")]

    def __str__(self) -> str:
        return f"{self.destination}: {self.from_state} -> {self.to_state}"


class DestinationSlot(models.Model):
    """One unit of a destination's limit, shared by every dispatcher through the database.

    A concurrency slot is held for the length of one call (or of a claim batch's calls one after another)
    and free again right after it. A rate slot is held for one request and free again one second after its
    answer came back, so that however the network delays requests, no more than the limit can reach the
    receiver within any one second. A holder that dies gives its slots back when their lease
    (`free_at`, on the database clock) runs out.
    """

    destination = models.CharField(max_length=40)
    kind = models.CharField(max_length=12, choices=SlotKind.choices)
    number = models.PositiveIntegerField(
        help_text="Slots numbered at or above the limit are not used."
    )
    free_at = models.DateTimeField(
        null=True, blank=True, help_text="Free from this time (database clock); empty = free."
    )
    holder = models.CharField(max_length=160, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["destination", "kind", "number"], name="destination_slot_unique_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.destination} {self.kind} slot {self.number}"
