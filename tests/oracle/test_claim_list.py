"""docs/console.md lists every claim and the truth it is checked against: each claim the oracle checks
(`CHECKS`) is in the list, each listed claim has a check, and each claim named in the console's code and
templates (a `Claim("…")`, a Health figure, a count) has both. A claim of a record's field (`{% stated %}`)
is named at run time: one without a check fails the oracle on the screen that shows it."""

import re
from pathlib import Path

from tests.oracle.oracle import CHECKS

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"`([a-z_]+\.[a-z_]+)`")
# How the code names a claim: a literal `Claim("a.b", …)`; a Health figure or row (`{% figure figures "x" %}`,
# `{% health_claim … "x" … %}`); a count (`{% counted … "a.b" … %}`); a destination's limit; an
# observation count (`{% agreement_count … "x" … %}`).
IN_CODE = [
    (re.compile(r'Claim\(\s*"([a-z_]+\.[a-z_]+)"'), "{}"),
    (re.compile(r'{% figure(?:_seconds|_age)? figures "([a-z_]+)" %}'), "health.{}"),
    (re.compile(r'{% health_claim \S+ "([a-z_]+)"'), "health.{}"),
    (re.compile(r'{% counted \S+ "([a-z_]+\.[a-z_]+)"'), "{}"),
    (re.compile(r'{% destination_limit \S+ "([a-z_]+)"'), "destination.{}"),
    (re.compile(r'{% agreement_count \S+ "([a-z_]+)"'), "observation.{}"),
]


def documented() -> set[str]:
    text = (ROOT / "docs" / "console.md").read_text()
    section = text.split("## Claims a machine can read", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in NAME.findall(row.split("|")[1])}


def named_in_code() -> dict[str, str]:
    found = {}
    files = [*(ROOT / "console").rglob("*.py"), *(ROOT / "templates").rglob("*.html")]
    for path in files:
        text = path.read_text()
        for pattern, form in IN_CODE:
            for match in pattern.finditer(text):
                found.setdefault(form.format(match.group(1)), str(path.relative_to(ROOT)))
    return found


def test_every_claim_checked_is_listed_in_the_docs_and_every_listed_claim_is_checked():
    listed = documented()
    assert len(listed) > 40
    assert sorted(set(CHECKS) - listed) == [], "checked by the oracle, missing in docs/console.md"
    assert sorted(listed - set(CHECKS)) == [], "listed in docs/console.md, no truth check"


def test_every_claim_named_in_the_code_is_listed_and_checked():
    named = named_in_code()
    assert {"handoff.state", "health.pending", "workspace.awaiting"} <= set(named)
    listed = documented()
    missing = {name: where for name, where in named.items() if name not in listed}
    assert missing == {}, "named in the code, missing in docs/console.md"
    unchecked = {name: where for name, where in named.items() if name not in CHECKS}
    assert unchecked == {}, "named in the code, no truth check in tests/oracle"
