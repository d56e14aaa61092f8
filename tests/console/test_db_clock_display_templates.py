"""Every template that shows an age or a wait (`timesince`, `timeuntil`) loads `db_clock`, whose filters of
those names measure from the database clock: without it Django's own filters measure from the web host's clock
(`console/templatetags/db_clock.py`)."""

import re

from tests.processes import ROOT

USES = re.compile(r"\|\s*time(since|until)\b")
LOADS = re.compile(r"{%\s*load\s[^%]*\bdb_clock\b[^%]*%}")


def template_files():
    yield from (ROOT / "templates").rglob("*.html")
    for app in ("approvals", "console", "outbox", "reconciliation", "delivery"):
        yield from (ROOT / app / "templates").rglob("*.html")


def test_every_template_showing_an_age_loads_the_database_clock_filters():
    showing = {path for path in template_files() if USES.search(path.read_text())}
    missing = sorted(
        str(path.relative_to(ROOT)) for path in showing if not LOADS.search(path.read_text())
    )
    assert len(showing) >= 10  # the list, the detail pages, the queues, the health page, …
    assert missing == [], f"show ages without {{% load db_clock %}}: {missing}"
