"""Alerts that page: a destination that is paused (unreachable, or its credentials refused) and many
handoffs failing at once. They are about the system, not about one handoff, so they carry no action
keys or payloads: the destination, since when, why, and how many handoffs wait, with a link.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count
from django.urls import reverse

from lib.databases import DB
from outbox.models import DestinationHealth, DestinationState, Handoff, HandoffState
from outbox.redaction import redact_text
from reconciliation.alerts.items import absolute
from reconciliation.models import AlertKind, AlertRecord, AlertSeverity


@dataclass(frozen=True)
class PageEpisode:
    kind: str
    group_key: str
    destination: str
    episode_at: datetime
    failure_class: str


def paused_destinations() -> list[DestinationHealth]:
    """Destinations paused right now (the health page and every affected handoff show them too)."""
    return list(
        DestinationHealth.objects.using(DB).filter(state=DestinationState.PAUSED).order_by("name")
    )


def page_episodes(*, now: datetime) -> list[PageEpisode]:
    """One episode per pause of a destination, and one per window in which many handoffs failed."""
    episodes = [
        PageEpisode(
            AlertKind.DESTINATION_PAUSED,
            f"destination:{h.name}:{h.paused_at.isoformat()}",
            h.name,
            h.paused_at,
            h.pause_reason,
        )
        for h in paused_destinations()
        if h.paused_at is not None
    ]
    window = timedelta(minutes=settings.ALERT_WIDESPREAD_MINUTES)
    failing = Handoff.objects.using(DB).filter(
        state=HandoffState.NEEDS_ATTENTION, attention_since__gte=now - window
    )
    if failing.count() >= settings.ALERT_WIDESPREAD_THRESHOLD:
        bucket = int(now.timestamp() // window.total_seconds())
        start = datetime.fromtimestamp(bucket * window.total_seconds(), tz=now.tzinfo)
        episodes.append(
            PageEpisode(AlertKind.WIDESPREAD, f"widespread:{bucket}", "", start, "many")
        )
    return episodes


def _waiting(destination: str) -> int:
    return (
        Handoff.objects.using(DB)
        .filter(destination=destination, state=HandoffState.PENDING)
        .count()
    )


def health_link() -> str:
    return absolute(reverse("reconciliation:health"))


def _render_destination_page(record: AlertRecord, link: str) -> tuple[str, str, dict]:
    health = DestinationHealth.objects.using(DB).filter(name=record.destination).first()
    why = {"unreachable": "unreachable", "unservable": "cannot be served"}.get(
        record.failure_class, "credentials refused"
    )
    subject = f"[handoff] PAGE: destination {record.destination} {why} since {record.episode_at:%Y-%m-%d %H:%M} UTC"
    fields = {
        "destination": record.destination,
        "reason": record.failure_class,
        "since": record.episode_at.isoformat(),
        "handoffs_waiting": _waiting(record.destination),
        "still_paused": bool(health and health.state == DestinationState.PAUSED),
        "last_error": redact_text(health.last_error if health else "")[:500],
    }
    # Each destination has credentials of its own kind (a signing secret, a bearer token, an SMTP password):
    # the page names the destination, whose own page says where each of its secrets comes from.
    next_step = (
        f"check the credentials of destination {record.destination} (its page says where each "
        "secret comes from) and restore or rotate them"
        if record.failure_class == "credential"
        else f"check that destination {record.destination} is up and reachable"
    )
    lines = [
        subject.removeprefix("[handoff] "),
        "",
        "Deliveries wait while it is paused; no handoff spends "
        "an attempt. Probes resume it by themselves once a call succeeds.",
        "",
        f"Handoffs waiting:  {fields['handoffs_waiting']}",
        f"Last error:        {fields['last_error']}",
        f"Next step:         {next_step}",
        f"Open:              {link}",
    ]
    return subject, "\n".join(lines), fields


def _render_widespread_page(record: AlertRecord, link: str) -> tuple[str, str, dict]:
    by_class = dict(
        Handoff.objects.using(DB)
        .filter(state=HandoffState.NEEDS_ATTENTION, attention_since__gte=record.episode_at)
        .order_by()
        .values_list("failure_class")
        .annotate(n=Count("id"))
    )
    total = sum(by_class.values())
    subject = f"[handoff] PAGE: {total} handoffs need attention since {record.episode_at:%Y-%m-%d %H:%M} UTC"
    lines = [subject.removeprefix("[handoff] "), ""] + [
        f"{cls or 'none'}: {n}" for cls, n in sorted(by_class.items())
    ]
    lines += ["", f"Open: {link}"]
    return (
        subject,
        "\n".join(lines),
        {"since": record.episode_at.isoformat(), "by_failure_class": by_class, "link": link},
    )


def render_page(record: AlertRecord, *, now: datetime) -> tuple[str, str, dict]:
    """Subject, body and webhook fields of one page."""
    if record.kind == AlertKind.DESTINATION_PAUSED:
        # The destination's own page: its state, events, probe-now and pause.
        link = absolute(reverse("destinations:detail", args=(record.destination,)))
        return _render_destination_page(record, link)
    return _render_widespread_page(record, health_link())


def page_record_fields(episode: PageEpisode) -> dict:
    return {
        "kind": episode.kind,
        "severity": AlertSeverity.PAGE,
        "group_key": episode.group_key,
        "destination": episode.destination,
        "episode_at": episode.episode_at,
        "failure_class": episode.failure_class,
    }
