"""`manage.py demo_alert_channels`: workspace 7 of the demo gets a page channel (a signed webhook) and a queue
channel (a Slack-compatible payload), both to the demo's receiver of alerts (`demo_alert_sink`, on
DEMO_ALERT_PORT), so that the demo's incidents have notifications to show. Run again, it changes nothing.
Once a workspace has a channel of severity page, its incidents page instead of the older single pages."""

import os

from django.core.management.base import BaseCommand, CommandError

from incidents.models import AlertChannel, ChannelKind, IncidentSeverity
from lib.databases import DB

DEMO_WORKSPACE = 7
# The name of the variable that holds the signing secret (scripts/local_env.sh writes it to var/run.env).
SECRET_ENV = "DEMO_ALERT_WEBHOOK_SECRET"  # noqa: S105 - a variable name, not a secret


def demo_channels(port: int) -> list[dict]:
    base = f"http://127.0.0.1:{port}"
    return [
        {
            "name": "demo pager",
            "kind": ChannelKind.WEBHOOK,
            "target": f"{base}/page",
            "secret_env": SECRET_ENV,
            "severity": IncidentSeverity.PAGE,
        },
        {
            "name": "demo queue",
            "kind": ChannelKind.SLACK,
            "target": f"{base}/queue",
            "secret_env": "",
            "severity": IncidentSeverity.QUEUE,
        },
    ]


class Command(BaseCommand):
    help = "Give the demo's workspace 7 a page and a queue alert channel to the demo's alert sink."

    def handle(self, *args, **options):
        port = os.environ.get("DEMO_ALERT_PORT", "")
        if not port.isdigit():
            raise CommandError("DEMO_ALERT_PORT must be set (scripts/local_env.sh sets it)")
        for fields in demo_channels(int(port)):
            name = fields.pop("name")
            AlertChannel.objects.using(DB).update_or_create(
                workspace_id=DEMO_WORKSPACE, name=name, defaults={**fields, "level": 0}
            )
        self.stdout.write(f"alert channels of workspace {DEMO_WORKSPACE}: demo pager, demo queue")
