from django.core.management.base import BaseCommand

from incidents.channels.delivery import notifications_deliver_now
from incidents.sweep import alerts_send_due


class Command(BaseCommand):
    help = (
        "One pass of the alert sweep (incidents in step with their causes, pages and escalations queued), "
        "then the due notifications delivered by the outbox's engine, as a dispatcher would."
    )

    def handle(self, *args, **options):
        result = alerts_send_due()
        result.incidents["notifications_claimed"] = notifications_deliver_now()
        self.stdout.write(", ".join(f"{name} {n}" for name, n in result.incidents.items()))
