from django.core.management.base import BaseCommand
from django_q.models import Schedule


class Command(BaseCommand):
    help = (
        "Create or update the django-q2 schedules (dispatch sweep, work status pull). "
        "Safe to run any number of times."
    )

    def handle(self, *args, **options):
        for name, func in (
            ("outbox-sweep", "outbox.tasks.sweep"),
            # Each pulled destination's due reads (its `every_seconds` apart per handoff).
            ("work-status-pull", "outbox.tasks.work_status_pull"),
        ):
            Schedule.objects.update_or_create(
                name=name,
                defaults={
                    "func": func,
                    "schedule_type": Schedule.MINUTES,
                    "minutes": 1,
                    "repeats": -1,
                },
            )
            self.stdout.write(f"schedule {name}: every minute")
