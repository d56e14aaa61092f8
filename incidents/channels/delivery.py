"""Notifications ride the outbox's engine: each alert channel is a destination, each notification a handoff.

A channel becomes a destination row named `alert-channel-<id>` of a kind the engine knows
(`channel_destination`): a webhook or Slack-style channel the `webhook` kind (Standard Webhooks signature,
`webhook-id` the notification's id), PagerDuty the `pagerduty_events` kind (`dedup_key`), e-mail the `smtp`
kind (Message-ID derived from the handoff's key) through EMAIL_HOST. A notification is recorded as a
handoff to it (`notification_handoff_record`, in the transaction that queues the notification) under the
key `incident:<workspace>:<incident>:<notification number>:<channel>`; the dispatchers claim, lease,
fence, retry and settle it like any handoff (docs/incidents.md says what each kind does with an unknown
outcome). Just before the call the dispatcher asks `notification_send_check`
(`incidents/services/incidents.py`, registered in `IncidentsConfig.ready`): a page whose cause has ended is
withdrawn, never sent.
"""

from django.conf import settings

from incidents.channels.payloads import payload_for
from incidents.models import AlertChannel, ChannelKind, Notification
from incidents.text import incident_summary
from lib.databases import DB
from outbox.destinations import destination_named
from outbox.dispatch.dispatcher import sweep
from outbox.models import Handoff
from outbox.models.handoffs import CHANNEL_DESTINATION_PREFIX, NOTIFICATION_WORKFLOW
from outbox.services.destination_configs import destination_config_put, product_mail_config
from outbox.services.recording import handoff_record

KEY_PREFIX = "incident:"
ACTOR = "incident notifications"


def channel_destination_name(channel: AlertChannel) -> str:
    return f"{CHANNEL_DESTINATION_PREFIX}{channel.pk}"


def _retry() -> dict:
    return {
        "base_delay": settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS,
        "max_delay": settings.ALERT_NOTIFICATION_RETRY_CAP_SECONDS,
        "max_attempts": settings.ALERT_NOTIFICATION_MAX_ATTEMPTS,
    }


def channel_destination(channel: AlertChannel) -> tuple[str, dict]:
    """(kind, configuration) of the destination that delivers to this channel."""
    common = {"timeout": settings.ALERT_NOTIFICATION_TIMEOUT_SECONDS, "retry": _retry()}
    if channel.kind == ChannelKind.PAGERDUTY:
        return "pagerduty_events", {
            "url": channel.target,
            "routing_key_variable": channel.secret_env,
            **common,
        }
    if channel.kind == ChannelKind.EMAIL:
        return "smtp", {**product_mail_config(), **common}
    config = {"url": channel.target, **common}
    if channel.kind == ChannelKind.WEBHOOK:
        config["id_field"] = "id"
    if channel.secret_env:
        config["secret_variable"] = channel.secret_env
    return "webhook", config


def channel_destination_sync(channel: AlertChannel) -> str:
    """The channel's destination row in step with the channel (and the settings it reads); its name."""
    kind, config = channel_destination(channel)
    name = channel_destination_name(channel)
    destination_config_put(
        name=name, kind=kind, config=config, enabled=channel.enabled, actor_label=ACTOR
    )
    return name


def notification_key(notification: Notification) -> str:
    incident = notification.incident
    workspace = "-" if incident.workspace_id is None else incident.workspace_id
    return f"{KEY_PREFIX}{workspace}:{incident.pk}:{notification.number}:{notification.channel_id}"


def notification_handoff_record(notification: Notification) -> Handoff:
    """The notification's handoff to its channel's destination. Inside the caller's transaction."""
    incident = notification.incident
    summary = incident_summary(incident, workspace_id=notification.channel.workspace_id)
    handoff = handoff_record(
        workflow=NOTIFICATION_WORKFLOW,
        workspace_id=incident.workspace_id or 0,
        source_ref=f"incident {incident.pk} notification {notification.message_id}",
        # No request revision (0): a request's steps are the handoffs whose source_id is its id, and an
        # incident's id is no request's (tests/incidents/test_notification_not_a_step.py).
        source_id=0,
        action_key=notification_key(notification),
        payload=payload_for(notification, summary),
        destination=channel_destination_sync(notification.channel),
    )
    Notification.objects.using(DB).filter(pk=notification.pk).update(handoff_id=handoff.pk)
    return handoff


def notifications_deliver_now(*, passes: int = 3) -> int:
    """Deliver the open notifications now through the outbox's engine (`manage.py send_alerts`, tests), as a
    dispatcher's pass would (`outbox.dispatch.dispatcher.sweep`: leases, the due handoffs, settlement of the
    uncertain ones), a few passes while one claims anything. The number of handoffs claimed."""
    names = sorted(
        set(Handoff.objects.using(DB).open().notifications().values_list("destination", flat=True))
    )
    claimed = 0
    for name in names:
        for _ in range(passes):
            stats = sweep(destination=destination_named(name))
            claimed += stats.claimed
            if not stats.claimed and not stats.settled:
                break
    return claimed
