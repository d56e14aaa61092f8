import secrets

from axes.utils import reset as axes_reset
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from approvals.management.commands.demo import DEMO_USERS


class Command(BaseCommand):
    help = "Give every demo user a new password (random unless --password) and print it; lifts sign-in lockouts."

    def add_arguments(self, parser):
        parser.add_argument(
            "--password", default=None, help="The new password for every demo user."
        )

    def handle(self, *args, password=None, **options):
        User = get_user_model()
        users = list(User.objects.filter(username__in=DEMO_USERS).order_by("username"))
        if not users:
            raise CommandError("no demo users: run `manage.py demo` (or `make run`) first")
        password = password or secrets.token_urlsafe(9)
        with transaction.atomic():
            for user in users:
                user.set_password(password)
                user.save(update_fields=["password"])
        for user in users:
            # Failed sign-ins with the forgotten password may have locked the account out.
            axes_reset(username=user.get_username())
        names = ", ".join(u.get_username() for u in users)
        self.stdout.write(self.style.SUCCESS(f"New password for {names}:"))
        self.stdout.write(f"    {password}")
