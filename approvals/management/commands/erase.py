"""`manage.py erase --email ADDRESS | --business-id FIELD=VALUE --reason WHY --as USER`: erase one data
subject's personal fields on request (GDPR article 17), keeping keys, hashes, receipts and decisions
(docs/security.md, "Erasure"). USER needs the "erase personal data" permission. Prints what was erased,
by kind and workspace, never the data."""

from django.core.management.base import BaseCommand, CommandError

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.selectors import active_user_named
from approvals.services.erasure import ErasureRefused, subject_erase, subject_named


class Command(BaseCommand):
    help = "Erase one data subject's personal fields, keeping the proof."

    def add_arguments(self, parser):
        parser.add_argument("--email", default="")
        parser.add_argument("--business-id", dest="business_id", default="", help="FIELD=VALUE")
        parser.add_argument("--reason", required=True)
        parser.add_argument("--as", dest="username", required=True)

    def handle(self, *args, **options):
        actor = active_user_named(options["username"])
        if actor is None:
            raise CommandError(f"no active user {options['username']!r}")
        try:
            subject = subject_named(email=options["email"], business_id=options["business_id"])
            erasures = subject_erase(subject=subject, reason=options["reason"], actor=actor)
        except (InvalidPayload, ApprovalDenied, ErasureRefused) as exc:
            raise CommandError(str(exc)) from exc
        if not erasures:
            self.stdout.write("no request names this subject: nothing erased")
        for erasure in erasures:
            self.stdout.write(
                f"erasure {erasure.pk}: workspace {erasure.workspace_id}: "
                f"{erasure.counts_words or 'nothing'}"
            )
