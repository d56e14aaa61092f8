from django.core.management.base import BaseCommand
from django_q.models import Schedule


class Command(BaseCommand):
    help = (
        "Create or update the django-q2 schedule of the approval deadlines sweep (reminders, "
        "escalations, expiry). Safe to run any number of times."
    )

    def handle(self, *args, **options):
        Schedule.objects.update_or_create(
            name="approval-deadlines",
            defaults={
                "func": "approvals.tasks.approval_deadlines_sweep",
                "schedule_type": Schedule.MINUTES,
                "minutes": 5,
                "repeats": -1,
            },
        )
        self.stdout.write("schedule approval-deadlines: every 5 minutes")
