"""A destination's holds: each reason it takes no call, with its start, its end (or "until a probe
succeeds") and who set it: an operator's pause, a maintenance window, the breaker's pause, a credential
hold, a Retry-After hold, an unservable hold.

Holds overlap: the destination is held while any one is live, and adding, ending or expiring one never
ends another (issue 36, item 1: a window scheduled during a pause ended the pause). Live is asked on the
database's clock, in the same query that reads the destination's limits (`DestinationHealthQuerySet`), by
the partial index on the holds not ended."""

from collections.abc import Iterable
from datetime import datetime

from django.db import models
from django.db.models.functions import Coalesce, Least

from outbox.clock import DbClockDateTimeField, db_now


class HoldKind(models.TextChoices):
    OPERATOR_PAUSE = "operator_pause", "Paused by an operator"
    WINDOW = "window", "Maintenance window"
    # Set by the system (`outbox/services/breaker.py`, `outbox/services/limits.py`), named in `set_by`.
    BREAKER = "breaker", "Breaker pause"
    CREDENTIAL = "credential", "Credential hold"
    RETRY_AFTER = "retry_after", "Retry-After hold"
    UNSERVABLE = "unservable", "Cannot be served"


# The holds a person sets and ends (`outbox/services/destination_windows.py`); the others are the system's.
OPERATOR_KINDS = frozenset({HoldKind.OPERATOR_PAUSE, HoldKind.WINDOW})
# The breaker's holds: each ends when a probe succeeds (`until_probe`), or for an unservable destination
# when a dispatcher can serve it; the breaker's row (`DestinationHealth`) schedules the probes.
BREAKER_KINDS = frozenset({HoldKind.BREAKER, HoldKind.CREDENTIAL, HoldKind.UNSERVABLE})
# The holds a destination is meant to wait through: an operator's pause or maintenance window, and the wait its
# own Retry-After asked for. What fell due during one is behind only from its end (the backlog alert,
# `incidents/causes.py`). The breaker's holds are no one's intent: a backlog behind them is the failure's.
INTENDED_KINDS = (HoldKind.OPERATOR_PAUSE, HoldKind.WINDOW, HoldKind.RETRY_AFTER)


def hold_end():
    """When a hold stopped holding: its early end or its own end, whichever came first; null while it has
    neither (a pause until resumed). Coalesced because LEAST is null on SQLite if either is."""
    return Coalesce(Least("ended_at", "ends_at"), "ended_at", "ends_at")


class DestinationHoldQuerySet(models.QuerySet):
    def not_ended(self):
        """Not ended by a person, and its end (if any) not passed yet (database clock)."""
        return self.filter(ended_at__isnull=True).filter(
            models.Q(ends_at__isnull=True) | models.Q(ends_at__gt=db_now())
        )

    def live(self):
        """Holding the destination now (database clock)."""
        return self.not_ended().filter(starts_at__lte=db_now())

    def scheduled(self):
        """Starting later (database clock), soonest first."""
        return self.filter(ended_at__isnull=True, starts_at__gt=db_now()).order_by("starts_at")

    def of_breaker(self):
        """The breaker's live holds (its pause, a credential or an unservable hold): the one source of "paused
        by its breaker", its reason (the kind) and since when (`starts_at`). `DestinationHealth`'s `state`,
        `pause_reason` and `paused_at` are written beside them for the dispatchers of the previous release
        only (docs/operations.md, "Rolling deploys"): nothing reads those columns."""
        return self.live().filter(kind__in=BREAKER_KINDS)

    def held_without_probe(self):
        """Live, and no probe may end it: no permit, no call, not even a probe (the dispatcher's "held?")."""
        return self.live().filter(until_probe=False)

    def by_operators(self):
        return self.filter(kind__in=OPERATOR_KINDS)

    def intended_ended_after(self, after, *, now):
        """The intended holds (`INTENDED_KINDS`) that began by `now` and held past `after` (annotated `end`,
        `hold_end()`); read by the index of their ends (`dest_hold_intended_end_idx`)."""
        return (
            self.filter(kind__in=INTENDED_KINDS, starts_at__lte=now)
            .annotate(end=hold_end())
            .filter(end__gt=after)
            .filter(end__gt=models.F("starts_at"))
        )

    def backlog_since(self, firsts: Iterable[tuple[str, datetime]], *, now) -> list[datetime]:
        """The backlog rule's start of each (destination, oldest due time) pair (`HandoffQuerySet.backlog`,
        read by the backlog incident and `/metrics`' `handoff_oldest_due_age_seconds` alike): the later of the
        due time and the end of the destination's last intended hold (`INTENDED_KINDS`) that held past it; a
        destination catching up after its operator's pause or window, or a Retry-After wait, is behind only
        from the hold's end. In the pairs' order; one query, whatever the number of destinations."""
        firsts = list(firsts)
        if not firsts:
            return []
        ended = dict(
            self.filter(destination__in={name for name, _ in firsts})
            .intended_ended_after(min(first for _, first in firsts), now=now)
            .order_by()
            .values_list("destination")
            .annotate(last=models.Max("end"))
        )
        return [max(first, ended.get(name) or first) for name, first in firsts]


class DestinationHold(models.Model):
    """One hold on a destination: an operator's pause (from now, until a time or until resumed), a
    maintenance window (from a time to a time), a Retry-After hold (until the time the answer asked for), an
    unservable hold (until a dispatcher can serve it), or the breaker's pause for an outage or refused
    credentials (`until_probe`: until a probe succeeds). While live without `until_probe` no permit is given
    (`outbox/services/limits.py`): nothing is claimed, no attempt, retry window or probe is spent. While an
    `until_probe` hold is live only the breaker's probe is sent. Ended by a person or the system (`ended_at`,
    `ended_by`) or by its own end passing; the row stays as the record until it has stopped holding for the
    retention age (`HANDOFF_RETENTION_DAYS`), when retention's run deletes it (`destination_holds_prune` in
    `outbox/services/retention.py`; an operator's pause, window and resume stay as `DestinationEvent`s)."""

    destination = models.CharField(max_length=40)
    kind = models.CharField(max_length=20, choices=HoldKind.choices)
    reason = models.CharField(max_length=200)
    starts_at = models.DateTimeField(help_text="From (database clock for a pause).")
    ends_at = models.DateTimeField(
        null=True, blank=True, help_text="Until; empty: until a person ends it."
    )
    until_probe = models.BooleanField(
        default=False, db_default=False, help_text="Ends when a probe of the destination succeeds."
    )
    set_by = models.CharField(max_length=150, blank=True)
    # A breaker's hold: why it pauses the destination (`PauseReason`), as the breaker decided it. Empty on the
    # holds of a person, of Retry-After, and on the breaker's written before the column (its kind says why:
    # `outbox/models/destinations.py` PAUSE_REASON_OF_HOLD); a database default for the previous release.
    pause_reason = models.CharField(max_length=16, blank=True, default="", db_default="")
    ended_at = models.DateTimeField(
        null=True, blank=True, help_text="Ended early (by a person, a probe, a dispatcher)."
    )
    ended_by = models.CharField(max_length=150, blank=True)
    created_at = DbClockDateTimeField(auto_now_add=True)

    objects = DestinationHoldQuerySet.as_manager()

    class Meta:
        indexes = [
            # "Live now" for one destination: its holds not ended, by start.
            models.Index(
                fields=["destination", "starts_at"],
                condition=models.Q(ended_at__isnull=True),
                name="destination_hold_open_idx",
            ),
            # The latest end of a destination's intended holds after a time (the backlog alert's age).
            models.Index(
                models.F("destination"),
                hold_end(),
                condition=models.Q(kind__in=INTENDED_KINDS),
                name="dest_hold_intended_end_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.destination}: {self.kind} from {self.starts_at}"
