from django.conf import settings
from django.core.management.base import BaseCommand
from django_q.models import Schedule


class Command(BaseCommand):
    help = "Create or update the django-q2 schedules of reconciliation and the sending of alerts. Safe to run again."

    def handle(self, *args, **options):
        for name, func, minutes in (
            (
                "reconciliation",
                "reconciliation.tasks.reconcile",
                settings.RECONCILIATION_EVERY_MINUTES,
            ),
            (
                "send-alerts",
                "incidents.tasks.alerts_send_due",
                settings.ALERT_SEND_EVERY_MINUTES,
            ),
        ):
            Schedule.objects.update_or_create(
                name=name,
                defaults={
                    "func": func,
                    "schedule_type": Schedule.MINUTES,
                    "minutes": minutes,
                    "repeats": -1,
                },
            )
            self.stdout.write(f"schedule {name}: every {minutes} minute(s)")
