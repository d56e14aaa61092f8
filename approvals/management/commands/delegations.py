"""`manage.py delegations grant | revoke | list`: an approver's delegate for a bounded period, audited.

    grant APPROVER DELEGATE --from WHEN --until WHEN --reason WHY [--as USER]
    revoke ID [--as USER]
    list          the delegations not yet ended, revoked ones included

`--as` names who does it (default: the approver; an administrator covering an absence needs the
"add approval delegation" permission). See docs/intake.md, "Delegates".
"""

from django.core.management.base import BaseCommand, CommandError

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import ApprovalDelegation
from approvals.selectors import active_user_named
from approvals.services.delegations import delegation_grant, delegation_revoke
from lib.moments import BadMoment, parse_moment
from outbox.clock import db_time


def _user(username: str):
    user = active_user_named(username)
    if user is None:
        raise CommandError(f"no active user {username!r}")
    return user


class Command(BaseCommand):
    help = "Delegates of approvers: grant one for a period, revoke one, list them."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="command", required=True)
        grant = commands.add_parser("grant", help="Name a delegate for a period.")
        grant.add_argument("approver")
        grant.add_argument("delegate")
        grant.add_argument("--from", dest="starts", required=True)
        grant.add_argument("--until", dest="ends", required=True)
        grant.add_argument("--reason", required=True)
        grant.add_argument("--as", dest="username", default="")
        revoke = commands.add_parser("revoke", help="End a delegation now.")
        revoke.add_argument("id", type=int)
        revoke.add_argument("--as", dest="username", required=True)
        commands.add_parser("list", help="Delegations not yet ended.")

    def handle(self, *args, **options):
        try:
            getattr(self, f"_{options['command']}")(options)
        except (InvalidPayload, BadMoment) as exc:
            raise CommandError(f"nothing written: {exc}") from exc
        except ApprovalDenied as exc:
            raise CommandError(f"refused: {exc}") from exc

    def _grant(self, options) -> None:
        approver = _user(options["approver"])
        delegation = delegation_grant(
            approver=approver,
            delegate=_user(options["delegate"]),
            starts_at=parse_moment(options["starts"], field="--from"),
            ends_at=parse_moment(options["ends"], field="--until"),
            reason=options["reason"],
            actor=_user(options["username"]) if options["username"] else approver,
        )
        self.stdout.write(f"delegation {delegation.pk}: {delegation}")

    def _revoke(self, options) -> None:
        delegation = delegation_revoke(
            delegation_id=options["id"], actor=_user(options["username"])
        )
        self.stdout.write(f"delegation {delegation.pk}: revoked at {delegation.revoked_at}")

    def _list(self, options) -> None:
        rows = ApprovalDelegation.objects.filter(ends_at__gt=db_time()).select_related(
            "approver", "delegate", "created_by", "revoked_by"
        )
        for d in rows.order_by("starts_at", "id"):
            revoked = f"\trevoked by {d.revoked_by} at {d.revoked_at}" if d.revoked_at else ""
            self.stdout.write(
                f"{d.pk}\t{d.delegate} for {d.approver}\t{d.starts_at} to {d.ends_at}\t"
                f"by {d.created_by}: {d.reason}{revoked}"
            )
