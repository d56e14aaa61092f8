"""`manage.py destinations apply FILE | list | check | holds | pause | window | resume NAME | probe NAME`:
destinations kept under version control, and what holds one (an operator's pause or window, set here too).

    apply FILE   create or update a row per entry of FILE (JSON: {"destinations": [{"name", "kind",
                 "enabled", ...the kind's keys}]}), all or nothing, each change audited as a destination
                 event; a file with any wrong entry (unknown kind, unknown key, missing secret) writes nothing;
                 the file itself is read strictly (lib/json_config.py: no key twice, no NaN, bounded)
    list         each destination: name, kind, enabled, whether its secrets are present, its contract
    check        build every enabled destination; exit 1 naming every one that cannot be served (it cannot
                 be built, a secret is missing, a call may outlive its lease) and every seed variable
                 (RECEIVER_*) that its row overrides, and every contract that cannot work (an override
                 contradicting what a status means, a path a sample answer lacks: contract_checks.py);
                 notes each path no sample answer checks
    holds NAME   every live hold of NAME (kind, reason, since, until, who set it) and the next scheduled,
                 in the words of its console page
    pause NAME --reason R [--minutes N]      an operator's pause from now (until resumed, or N minutes)
    window NAME --from T --to T --reason R   a maintenance window (UTC times, as on the console)
    resume NAME --reason R [--hold ID | --probe]
                 end hold ID, or the live pause (else the live window, else the next window); --probe:
                 ask a destination its breaker paused at once. Each a hold beside the others (they
                 overlap), audited as the console's are, by "manage.py destinations"
    probe NAME [--despite-holds]
                 run NAME's whole contract with a probe key (create, repeat, lookup, undo: meant for its
                 sandbox), each part's verdict and evidence; exit 1 if any part failed. While a hold is
                 live (a pause, a window, the breaker's, a Retry-After) exit 1 naming it, nothing sent,
                 unless --despite-holds (the console's tests refuse alike, with no override)

See docs/destinations/model.md.
"""

from contextlib import contextmanager

from django.core.management.base import BaseCommand, CommandError

from lib.databases import DB
from lib.json_config import JsonConfigRefused, load_json_config, parse_json_config
from lib.moments import BadMoment, parse_moment
from outbox.destinations.contract_checks import contract_refusals, unchecked_paths
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
from outbox.hold_lines import HoldLine, destination_holds_now
from outbox.models import DestinationConfig
from outbox.services.destination_configs import DestinationsRefused, destination_configs_apply
from outbox.services.destination_probes import ProbeHeld, ProbeRefused, destination_probe
from outbox.services.destination_windows import (
    InvalidWindow,
    destination_known,
    destination_pause_by_operator,
    destination_resume_by_operator,
    destination_schedule_window,
)

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
        probe = commands.add_parser(
            "probe", help="Run a destination's whole contract with a probe key (its sandbox)."
        )
        holds = commands.add_parser("holds", help="A destination's live holds and the next one.")
        holds.add_argument("name")
        pause = commands.add_parser("pause", help="Pause a destination from now.")
        pause.add_argument("name")
        pause.add_argument("--reason", required=True)
        pause.add_argument("--minutes", type=int, help="for this long (default: until resumed)")
        window = commands.add_parser("window", help="Schedule a maintenance window.")
        window.add_argument("name")
        window.add_argument("--from", dest="starts_at", required=True, help="UTC, 2026-12-01 22:00")
        window.add_argument("--to", dest="ends_at", required=True, help="UTC, 2026-12-01 23:00")
        window.add_argument("--reason", required=True)
        resume = commands.add_parser("resume", help="End a hold (or probe a paused destination).")
        resume.add_argument("name")
        resume.add_argument("--reason", required=True)
        resume.add_argument("--hold", type=int, help="the hold's number, as `holds` shows it (#12)")
        resume.add_argument("--probe", action="store_true")
        probe.add_argument("name")
        probe.add_argument("--key", help="the probe key, probe:<anything> (default: random)")
        probe.add_argument("--body", help="the JSON object created (default: its probe_body)")
        probe.add_argument(
            "--despite-holds",
            action="store_true",
            help="probe it even while a hold is live (a pause, a window, a Retry-After hold)",
        )

    def handle(self, *args, command: str, **options):
        handlers = {
            "apply": self._apply,
            "list": self._list,
            "check": self._check,
            "probe": self._probe,
            "holds": self._holds,
            "pause": self._pause,
            "window": self._window,
            "resume": self._resume,
        }
        handlers[command](**options)

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
        contracts = _contracts_refused(problems)
        self._write_served(problems.keys() | contracts.keys())
        for name in destinations_left_on_the_single_secret():
            self.stdout.write(
                f"note  {name} names no status-event secret (status_events.secret_env): "
                f"{SINGLE_SECRET_ENV} no longer verifies its status events, they are refused"
            )
        lines = [f"  {problem}" for _name, problem in sorted(problems.items())]
        lines += [f"  {refused}" for refused in seed_variables_refused()]
        lines += [f"  {line}" for name in sorted(contracts) for line in contracts[name]]
        if lines:
            raise CommandError(
                f"{len(problems.keys() | contracts.keys())} destination(s) cannot be served:\n"
                + "\n".join(lines)
            )

    def _write_served(self, held: set[str]) -> None:
        """An `ok` line for each enabled destination that can be served, and a `note` for each path of its
        contract that no sample answer checks."""
        for name in enabled_destination_names():
            if name not in held:
                self.stdout.write(f"ok  {describe_contract(destination_named(name))}")
        for line in _unchecked(held):
            self.stdout.write(f"note  {line}")

    def _holds(self, *, name: str, **_options):
        with _refusals():
            destination_known(name)  # a typo is refused as the page's 404, never "no hold live"
        holds = destination_holds_now(name)
        for line in holds.live:
            self.stdout.write(f"held  {_number(line)}{line.words}")
        if not holds.live:
            self.stdout.write(f"{name}: no hold live")
        if holds.next_scheduled:
            self.stdout.write(f"next  {_number(holds.next_scheduled)}{holds.next_scheduled.words}")

    def _pause(self, *, name: str, reason: str, minutes: int | None, **_options):
        with _refusals():
            destination_pause_by_operator(
                name=name,
                actor=None,
                reason=reason,
                for_seconds=minutes * 60.0 if minutes is not None else None,
                actor_label=ACTOR,
            )
        self._holds(name=name)

    def _window(self, *, name: str, starts_at: str, ends_at: str, reason: str, **_options):
        with _refusals():
            destination_schedule_window(
                name=name,
                actor=None,
                reason=reason,
                starts_at=parse_moment(starts_at, field="--from"),
                ends_at=parse_moment(ends_at, field="--to"),
                actor_label=ACTOR,
            )
        self._holds(name=name)

    def _resume(self, *, name: str, reason: str, hold: int | None, probe: bool, **_options):
        with _refusals():
            destination_resume_by_operator(
                name=name, actor=None, reason=reason, hold_id=hold, probe=probe, actor_label=ACTOR
            )
        self._holds(name=name)

    def _probe(
        self, *, name: str, key: str | None, body: str | None, despite_holds: bool, **_options
    ):
        try:
            report = destination_probe(
                name=name,
                key=key,
                body=_probe_body(body),
                actor_label=ACTOR,
                despite_holds=despite_holds,
            )
        except ProbeHeld as exc:
            raise CommandError(f"{exc}; --despite-holds to probe it anyway") from None
        except ProbeRefused as exc:
            raise CommandError(str(exc)) from None
        if report.despite:
            self.stdout.write(f"held ({report.despite}): probed anyway (--despite-holds)")
        self.stdout.write(f"probe {report.key} at {name}")
        for part in report.parts:
            self.stdout.write(f"  {part}")
        if report.failed:
            raise CommandError(f"{name}: the contract failed its probe (above)")


def _number(line: HoldLine) -> str:
    return f"#{line.hold_id} " if line.hold_id else ""


@contextmanager
def _refusals():
    """A pause, window or resume refused: exit 1 with the reason, nothing written."""
    try:
        yield
    except (InvalidWindow, BadMoment) as exc:
        raise CommandError(f"nothing changed: {exc}") from None


def _probe_body(text: str | None) -> dict | None:
    """`--body` read as strictly as the destinations file's `probe_body` (lib/json_config.py): a key twice,
    NaN or Infinity is refused naming where, never sent as the last key's value or as a non-JSON number."""
    if text is None:
        return None
    try:
        body = parse_json_config(text, source="--body")
    except JsonConfigRefused as exc:
        raise CommandError(f"nothing sent: {exc}") from None
    if not isinstance(body, dict):
        raise CommandError("nothing sent: --body must be a JSON object")
    return body


def _contracts_refused(problems: dict[str, str]) -> dict[str, list[str]]:
    """By name, why each enabled destination's contract cannot work (`contract_checks.py`)."""
    refused = {}
    for name in enabled_destination_names():
        if name not in problems and (found := contract_refusals(destination_named(name))):
            refused[name] = [f"destination {name!r}: {refusal}" for refusal in found]
    return refused


def _unchecked(held: set[str]) -> list[str]:
    return [
        f"{name}: {path} unchecked"
        for name in enabled_destination_names()
        if name not in held
        for path in unchecked_paths(destination_named(name))
    ]
