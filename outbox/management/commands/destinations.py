"""`manage.py destinations apply FILE | list | check`: destinations kept under version control.

    apply FILE   create or update a row per entry of FILE (JSON: {"destinations": [{"name", "kind",
                 "enabled", ...the kind's keys}]}), all or nothing, each change audited as a destination
                 event; a file with any wrong entry (unknown kind, unknown key, missing secret) writes nothing;
                 the file itself is read strictly (lib/json_config.py: no key twice, no NaN, bounded)
    list         each destination: name, kind, enabled, whether its secrets are present, its contract
    check        build every enabled destination; exit 1 naming every one that cannot be served (it cannot
                 be built, a secret is missing, a call may outlive its lease) and every seed variable
                 (RECEIVER_*) that its row overrides

See docs/destinations/model.md.
"""

from django.core.management.base import BaseCommand, CommandError

from lib.databases import DB
from lib.json_config import JsonConfigRefused, load_json_config
from outbox.destinations.registry import (
    DestinationInvalid,
    default_destination_name,
    describe_contract,
    destination_from_config,
    destination_named,
    destination_problems,
    enabled_destination_names,
    row_config,
    secret_sources,
    seed_config,
)
from outbox.destinations.seed_variables import seed_variables_refused
from outbox.destinations.status_events_config import (
    SINGLE_SECRET_ENV,
    destinations_left_on_the_single_secret,
)
from outbox.models import DestinationConfig
from outbox.services.destination_configs import DestinationsRefused, destination_configs_apply

ACTOR = "manage.py destinations"


def _contract(config: dict) -> str:
    try:
        destination = destination_from_config(config)
    except DestinationInvalid as exc:
        return f"cannot be built: {exc}"
    try:
        return describe_contract(destination)
    finally:
        destination.close()


def _secrets(config: dict) -> str:
    sources = secret_sources(config)
    if not sources:
        return "no secret"
    return ", ".join(f"{s.where} {s.state}" for s in sources)


class Command(BaseCommand):
    help = "Destinations as data: apply a file of them, list them, check that every enabled one builds."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="command", required=True)
        apply = commands.add_parser("apply", help="Create or update destinations from a JSON file.")
        apply.add_argument("file")
        commands.add_parser(
            "list", help="Each destination, its secrets' presence and its contract."
        )
        commands.add_parser("check", help="Build every enabled destination; exit 1 on any problem.")

    def handle(self, *args, command: str, **options):
        {"apply": self._apply, "list": self._list, "check": self._check}[command](**options)

    def _apply(self, *, file: str, **_options):
        try:
            document = load_json_config(file)
        except JsonConfigRefused as exc:
            raise CommandError(f"nothing applied: {exc}") from None
        try:
            changes = destination_configs_apply(document=document, actor_label=ACTOR)
        except DestinationsRefused as refused:
            raise CommandError(
                "nothing applied:\n" + "\n".join(f"  {p}" for p in refused.problems)
            ) from refused
        for change in changes:
            self.stdout.write(f"{change.name}: {change.summary}")
        self.stdout.write(f"{len(changes)} destination(s) changed")

    def _list(self, **_options):
        rows = list(DestinationConfig.objects.using(DB).order_by("name"))
        listed = [(row_config(row), row.enabled, "") for row in rows]
        if default_destination_name() not in {row.name for row in rows}:
            listed.append((seed_config(), True, " (seed from settings)"))
        for config, enabled, note in sorted(listed, key=lambda item: item[0]["name"]):
            self.stdout.write(
                f"{config['name']}{note}  kind={config['kind']}  "
                f"{'enabled' if enabled else 'disabled'}  secrets: {_secrets(config)}\n"
                f"    {_contract(config)}"
            )

    def _check(self, **_options):
        problems = destination_problems()
        for name in enabled_destination_names():
            if name not in problems:
                self.stdout.write(f"ok  {describe_contract(destination_named(name))}")
        for name in destinations_left_on_the_single_secret():
            self.stdout.write(
                f"note  {name} names no status-event secret (status_events.secret_env): "
                f"{SINGLE_SECRET_ENV} no longer verifies its status events, they are refused"
            )
        lines = [f"  {problem}" for _name, problem in sorted(problems.items())]
        lines += [f"  {refused}" for refused in seed_variables_refused()]
        if lines:
            raise CommandError(
                f"{len(problems)} destination(s) cannot be served:\n" + "\n".join(lines)
            )
