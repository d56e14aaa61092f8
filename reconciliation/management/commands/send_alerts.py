from django.core.management.base import BaseCommand

from reconciliation.alerts import alerts_send_due


class Command(BaseCommand):
    help = (
        "One pass of the alert sweep: incidents in step with their causes, due notifications sent."
    )

    def handle(self, *args, **options):
        result = alerts_send_due()
        self.stdout.write(", ".join(f"{name} {n}" for name, n in result.incidents.items()))
