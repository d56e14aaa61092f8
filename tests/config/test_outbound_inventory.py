"""docs/operations.md "What the console connects to" lists every system the console connects to (ASVS 5.0
13.1.1): each variable of config/settings that names a place to connect to, each destination kind and each
alert channel kind is named in that section. A new outbound setting or kind fails here until the list has it."""

import re

from incidents.models import ChannelKind
from outbox.destinations.registry import KINDS
from tests.processes import ROOT

OPERATIONS = ROOT / "docs" / "operations.md"
HEADING = "## What the console connects to"

# A variable read from the environment, by any of the ways config/settings reads one.
READ = re.compile(
    r"""(?:environ(?:\.get)?\(|env_(?:int|float|bool)\(|_database\()\s*["']([A-Z][A-Z0-9_]+)["']"""
)
# Names that say "a place to connect to".
OUTBOUND = re.compile(r"(?:_URL|_ENDPOINT|_ISSUER|_SMTP_PORT)$|^EMAIL_BACKEND$")
# Read by the settings but never connected to, each with the reason.
NOT_CONNECTED = {
    "CONSOLE_BASE_URL": "the console's own address, written into links it sends; it never calls it",
}


def section() -> str:
    text = OPERATIONS.read_text(encoding="utf-8")
    start = text.find("\n" + HEADING + "\n")
    assert start != -1, f"docs/operations.md has no section {HEADING!r}"
    body = text[start + len(HEADING) + 2 :]
    following = re.search(r"^## ", body, flags=re.MULTILINE)
    return body[: following.start()] if following else body


def outbound_variables() -> set[str]:
    names = set()
    for path in [*(ROOT / "config" / "settings").glob("*.py"), *(ROOT / "config").glob("*.py")]:
        names |= set(READ.findall(path.read_text(encoding="utf-8")))
    return {name for name in names if OUTBOUND.search(name)} - set(NOT_CONNECTED)


def named(text: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", text))


def test_the_settings_name_the_places_this_test_knows_of():
    """The scan itself works: it finds the databases, the provider, the collector and the seeds."""
    found = outbound_variables()
    assert {
        "DATABASE_URL",
        "DELIVERY_DATABASE_URL",
        "OIDC_OP_TOKEN_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "RECEIVER_URL",
        "ALERT_WEBHOOK_URL",
        "EMAIL_BACKEND",
    } <= found, found


def test_every_outbound_setting_is_on_the_list_of_systems_the_console_connects_to():
    listed = named(section())
    missing = sorted(outbound_variables() - listed)
    assert not missing, f"settings naming a place to connect to, not in {HEADING!r}: {missing}"


def test_every_destination_kind_and_alert_channel_kind_is_on_the_list():
    listed = named(section())
    missing = sorted((set(KINDS) | {kind.value for kind in ChannelKind}) - listed)
    assert not missing, f"kinds that connect somewhere, not in {HEADING!r}: {missing}"
