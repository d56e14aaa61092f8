from django.core.management.base import BaseCommand
from django_q.models import Schedule


class Command(BaseCommand):
    help = "Create or update the django-q2 schedules (dispatch sweep). Safe to run any number of times."

    def handle(self, *args, **options):
        Schedule.objects.update_or_create(
            name="outbox-sweep",
            defaults={
                "func": "outbox.tasks.sweep",
                "schedule_type": Schedule.MINUTES,
                "minutes": 1,
                "repeats": -1,
            },
        )
        self.stdout.write("schedule outbox-sweep: every minute")
