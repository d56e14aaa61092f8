from django.conf import settings
from django.core.management.base import BaseCommand
from django_q.models import Schedule


class Command(BaseCommand):
    help = (
        "Create or update the django-q2 schedule of retention (archive_settled). Safe to run again."
    )

    def handle(self, *args, **options):
        minutes = settings.HANDOFF_RETENTION_EVERY_MINUTES
        Schedule.objects.update_or_create(
            name="outbox-retention",
            defaults={
                "func": "outbox.tasks.archive_settled",
                "schedule_type": Schedule.MINUTES,
                "minutes": minutes,
                "repeats": -1,
            },
        )
        self.stdout.write(f"schedule outbox-retention: every {minutes} minute(s)")
