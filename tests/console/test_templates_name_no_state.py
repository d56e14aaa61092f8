"""A template never spells a state's name: it asks the model (`handoff.is_delivered`,
`finding.is_live`, ...), so a renamed or added state cannot leave a screen quietly wrong."""

import re
from pathlib import Path

from django.conf import settings

from approvals.models import Mode, RequestState
from outbox.models import BulkJobState, HandoffKind, HandoffState
from outbox.models.states import WORK_STATUSES
from reconciliation.models import FindingStatus, RunStatus

NAMES = {
    str(value)
    for choices in (
        HandoffState,
        HandoffKind,
        BulkJobState,
        RequestState,
        Mode,
        FindingStatus,
        RunStatus,
    )
    for value in choices.values
} | set(WORK_STATUSES)
# A comparison in a template tag: `x == "name"`, `x != 'name'`, `"name" in x` ...
COMPARED = re.compile(r"""(?:==|!=)\s*["']([a-z_]+)["']|["']([a-z_]+)["']\s*(?:==|!=|in)\s""")


def _templates() -> list[Path]:
    return sorted(Path(settings.BASE_DIR, "templates").rglob("*.html"))


def test_no_template_compares_with_a_state_name():
    found = []
    for path in _templates():
        for tag in re.findall(r"{%.*?%}", path.read_text(), flags=re.S):
            for match in COMPARED.finditer(tag):
                name = match.group(1) or match.group(2)
                if name in NAMES:
                    found.append(f"{path.name}: {tag}")
    assert found == [], "templates that spell a state's name:\n" + "\n".join(found)


def test_the_check_sees_a_spelled_state():
    tag = '{% if handoff.state == "delivered" %}'
    assert COMPARED.search(tag).group(1) == "delivered"
    assert "delivered" in NAMES
