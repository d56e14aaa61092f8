"""`manage.py sign_on_identities list | link USER SUBJECT | unlink SUBJECT`, acting as an administrator.

A first sign-on never takes an existing account by name (docs/sso.md); an administrator binds one here:
`link dana 8c1e… --as root --reason "dana's account at Example Corp, checked with her manager"`. The
issuer is the configured provider's (`OIDC_OP_ISSUER`) unless `--issuer` names another. Each act is
recorded with its actor and reason (SignOnIdentityEvent, in admin)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from approvals.errors import ApprovalDenied, IdentityRefused, InvalidPayload
from approvals.models import SignOnIdentity, SignOnIdentityEvent
from approvals.selectors import active_user_named
from approvals.services.identities import identity_link, identity_unlink


def _active_user(name: str):
    user = active_user_named(name)
    if user is None:
        raise CommandError(f"no active user {name!r}")
    return user


class Command(BaseCommand):
    help = "List, link or unlink the identity provider's subjects and console accounts (administrators)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="every binding: issuer, subject, user, last sign-in")
        link = sub.add_parser("link", help="bind an existing account to a subject at the provider")
        link.add_argument("user")
        link.add_argument("subject")
        unlink = sub.add_parser("unlink", help="remove a binding; the account stays")
        unlink.add_argument("subject")
        for parser_ in (link, unlink):
            parser_.add_argument("--issuer", default="", help="default: OIDC_OP_ISSUER")
            parser_.add_argument("--as", dest="actor", required=True, help="a superuser's name")
            parser_.add_argument("--reason", required=True)

    def handle(self, *args, **options):
        if options["action"] == "list":
            rows = SignOnIdentity.objects.select_related("user").order_by("issuer", "subject")
            for row in rows:
                last = row.last_sign_in_at.isoformat() if row.last_sign_in_at else "never"
                self.stdout.write(f"{row.issuer}\t{row.subject}\t{row.user.get_username()}\t{last}")
            return
        issuer = options["issuer"] or settings.OIDC_OP_ISSUER
        if not issuer:
            raise CommandError("no issuer: set OIDC_OP_ISSUER or pass --issuer")
        actor = _active_user(options["actor"])
        try:
            if options["action"] == "link":
                identity_link(
                    user=_active_user(options["user"]),
                    issuer=issuer,
                    subject=options["subject"],
                    action=SignOnIdentityEvent.Action.LINKED_BY_ADMIN,
                    actor=actor,
                    reason=options["reason"],
                )
            else:
                identity_unlink(
                    issuer=issuer, subject=options["subject"], actor=actor, reason=options["reason"]
                )
        except InvalidPayload as exc:
            raise CommandError("; ".join(exc.reasons)) from exc
        except (ApprovalDenied, IdentityRefused) as exc:
            raise CommandError(f"refused: {exc}") from exc
        self.stdout.write(f"{options['action']}ed {options['subject']!r} at {issuer}")
