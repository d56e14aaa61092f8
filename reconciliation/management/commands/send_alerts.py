from django.core.management.base import BaseCommand

from reconciliation.alerts import alerts_send_due


class Command(BaseCommand):
    help = "Send alerts for handoffs that need attention, breached SLAs and new reconciliation findings (once each)."

    def handle(self, *args, **options):
        result = alerts_send_due()
        recorded = ", ".join(f"{kind} {n}" for kind, n in result.recorded.items())
        self.stdout.write(
            f"new episodes: {recorded}; messages sent {result.messages_sent}, "
            f"webhooks {result.webhooks_sent}, groups not delivered {result.failed}"
        )
