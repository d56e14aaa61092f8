"""The subcommands of `manage.py handoffs` and their arguments: one function per subcommand, each the
console's screen or action for the acting user (`--as`), returning plain data that `output` prints."""

import argparse

from django.contrib.auth import get_user_model

from console.cli import single
from console.cli.bulk import handoffs_bulk
from console.cli.frame import acting_user, require_operator, run_action, visible_handoff
from console.cli.reading import handoff_list, handoff_show
from console.filters import HandoffFilter
from console.handoff_action_words import HOLD_WHOLE_CASE_BY_DEFAULT

# The console's list filter, as options (`--failure-class` for its `failure_class`).
FILTERS = tuple(HandoffFilter.base_filters)
ACTIONS = tuple(single.ACTIONS)


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--as",
        dest="acting_as",
        required=True,
        metavar="USERNAME",
        help="act as this user: their workspaces and roles are checked as in the browser",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")
    return common


def add_filter_options(parser) -> None:
    for name in FILTERS:
        parser.add_argument(
            "-q" if name == "q" else f"--{name.replace('_', '-')}",
            dest=f"filter_{name}",
            default="",
            metavar=name.upper(),
            help=f"the console's filter '{name}'"
            + (": me, nobody or a username" if name == "owner" else ""),
        )


def add_subcommands(subparsers, common) -> None:
    listing = subparsers.add_parser("list", parents=[common], help="the console's handoff list")
    add_filter_options(listing)
    listing.add_argument("--after", default="", help="the cursor a previous page ended at")
    listing.add_argument("--limit", type=int, default=50, choices=range(1, 501), metavar="1..500")
    show = subparsers.add_parser("show", parents=[common], help="one handoff's page")
    show.add_argument("handoff", type=int)
    for action in ACTIONS:
        parser = subparsers.add_parser(
            action, parents=[common], help=f"{action} one handoff, or (with filters) every match"
        )
        parser.add_argument(
            "handoff", type=int, nargs="?", help="its id; omit it for a bulk action"
        )
        add_filter_options(parser)
        parser.add_argument("--reason", default="")
        parser.add_argument("--dry-run", action="store_true", help="preview: nothing is written")
        if action == "retry":
            parser.add_argument("--confirm-risk", action="store_true")
        if action == "assign":
            parser.add_argument("--to", required=True, metavar="USERNAME", help="or 'nobody'")
        if action == "hold":
            parser.add_argument(
                "--until", default="", metavar="TIME", help="e.g. '2026-12-24 18:00' (UTC)"
            )
            parser.add_argument(
                "--whole-case",
                action="store_true",
                default=HOLD_WHOLE_CASE_BY_DEFAULT,
                help="hold every step of its workflow instance (default: only this step)",
            )


def filter_data(options: dict) -> dict[str, str]:
    """The filter options given, as the console's query string would carry them (an owner named by
    username becomes its id; an unknown one is left for the filter to refuse)."""
    data = {name: options[f"filter_{name}"] for name in FILTERS if options.get(f"filter_{name}")}
    owner = data.get("owner")
    if owner and owner not in ("me", "nobody") and not owner.isdigit():
        pk = get_user_model().objects.filter(username=owner).values_list("pk", flat=True).first()
        data["owner"] = str(pk) if pk else owner
    return data


def run(subcommand: str, options: dict) -> dict:
    user = acting_user(options["acting_as"])
    if subcommand == "list":
        return handoff_list(
            user, filter_data(options), after=options["after"], limit=options["limit"]
        )
    if subcommand == "show":
        return handoff_show(user, options["handoff"])
    return _act(user, subcommand, options)


def _act(user, action: str, options: dict) -> dict:
    options = {"confirm_risk": False, "owner": options.get("to", ""), **options}
    data = filter_data(options)
    if options["handoff"] is None:
        if action in single.CASE_ACTIONS:
            raise argparse.ArgumentTypeError(f"{action} names one handoff id: it acts on one case")
        if not data:
            raise argparse.ArgumentTypeError(
                "name a handoff id, or filters for a bulk action over every match"
            )
        return handoffs_bulk(user, action, data, options)
    if data:
        raise argparse.ArgumentTypeError("a handoff id or filters, not both")
    handoff = visible_handoff(user, options["handoff"])
    require_operator(user, handoff)
    act = single.ACTIONS[action]
    if options["dry_run"]:
        return run_action(lambda *a: single.previewed(act, *a), user, handoff, options)
    return run_action(act, user, handoff, options)
