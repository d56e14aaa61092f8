"""A handoff table's row drawn in Python (`{% handoff_row h %}`, issue 40) is the template fragment it replaced,
byte for byte, in every shape a row takes: each state, a held case, a held destination, a live finding, an
owner, a client name that needs escaping, with and without the operator role, with each answer of a quick
action. And a list page no longer resolves template variables per row."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.template import Context, Template
from django.template.base import Variable
from django.utils import timezone

from console.views.handoff_list import table_rows
from outbox.clock import db_now_plus
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.services.case_holds import case_hold
from outbox.services.destination_windows import destination_pause_by_operator
from tests.builders import record
from tests.console.clients import client_for
from tests.factories import FindingFactory, HandoffFactory, grant_destination_admin

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState

# The row as templates/outbox/list.html drew it before (commit 6a057a0), verbatim: the reference of the tag.
FRAGMENT = (Path(__file__).parent / "handoff_row_before.html").read_text().rstrip("\n")


RESULTS = (
    None,
    {"level": "success", "text": 'Retried <now> & "again".'},
    {"level": "warning", "text": "The outcome is unknown.", "confirm_risk": True},
    {"text": "No level"},
)


def _rows_of_every_shape(world) -> list[Handoff]:
    olga = world["olga"]
    rows = [
        HandoffFactory(
            state=S.NEEDS_ATTENTION,
            failure_class=FailureClass.TRANSIENT,
            reason_code="retries_exhausted",
            attempts=3,
            owner=olga,
        ),
        HandoffFactory(state=S.UNCERTAIN, failure_class=FailureClass.UNCERTAIN, attempts=1),
        HandoffFactory(
            attempts=2,
            failure_class=FailureClass.TRANSIENT,
            reason_code="http_503",
            next_attempt_at=db_now_plus(600),
        ),
        HandoffFactory(attempts=2, failure_class=FailureClass.TRANSIENT, reason_code="http_503"),
        HandoffFactory(state=S.DELIVERED, attempts=1, destination_id="task-<7>"),
        HandoffFactory(state=S.CANCELLED),
        record(61, payload={"client_name": '<b>O\'Neil & "Sons"</b>', "plan": "standard"}),
        record(62, workspace_id=8),
    ]
    FindingFactory(action_key=rows[4].action_key)
    FindingFactory(action_key=rows[0].action_key)
    case_hold(handoff_id=rows[6].pk, actor=olga, reason="calling <ACME>", whole_case=False)
    Handoff.objects.filter(pk=rows[1].pk).update(created_at=timezone.now() - timedelta(days=2))
    return rows


def _drawn(template: Template, h: Handoff, operator_ws: set, result) -> str:
    context = {"h": h, "operator_ws": operator_ws, "row_result": result, "csrf_token": "t0k3n"}
    return template.render(Context(context))


def _table(workspace_ids):
    rows = Handoff.objects.select_related("owner", "case_hold").order_by("id")
    return table_rows(list(rows), workspace_ids)


@pytest.mark.parametrize("held_destination", [False, True])
def test_the_row_drawn_in_python_is_the_fragment_it_replaced(world, held_destination):
    rows = _rows_of_every_shape(world)
    if held_destination:
        admin = grant_destination_admin(world["olga"])
        destination_pause_by_operator(name=rows[2].destination, actor=admin, reason="a <pause>")
    fragment = Template(FRAGMENT)
    tag = Template("{% load handoff_rows %}{% handoff_row h %}")
    compared = 0
    for h in _table([7, 8]):
        for operator_ws in ({7}, set()):
            for result in RESULTS:
                assert _drawn(tag, h, operator_ws, result) == _drawn(
                    fragment, h, operator_ws, result
                ), h
                compared += 1
    shapes = "".join(_drawn(tag, h, {7}, None) for h in _table([7, 8]))
    # The shapes the comparison covered: quick actions, a finding, a case hold, escaping, a retry time.
    assert 'name="csrfmiddlewaretoken" value="t0k3n"' in shapes
    assert "Reconciliation found:" in shapes
    assert "held (case hold: calling &lt;ACME&gt;" in shapes
    assert "&lt;b&gt;O&#x27;Neil &amp; &quot;Sons&quot;&lt;/b&gt;" in shapes
    # A held destination's rows show its holds instead of their retry times.
    assert ("retry in " in shapes and "retry due now" in shapes) is not held_destination
    assert ('class="destination-holds"' in shapes) is held_destination
    assert compared == len(rows) * 2 * len(RESULTS)


def test_a_list_page_resolves_as_many_template_variables_with_fifty_rows_as_with_one(
    world, monkeypatch
):
    client = client_for(world["olga"])
    HandoffFactory(state=S.NEEDS_ATTENTION, failure_class=FailureClass.TRANSIENT, attempts=3)
    client.get("/handoffs/")  # warm: the session, the templates
    resolved = []
    resolve = Variable.resolve

    def counting(self, context):
        resolved.append(self.var)
        return resolve(self, context)

    monkeypatch.setattr(Variable, "resolve", counting)

    def lookups() -> int:
        resolved.clear()
        assert client.get("/handoffs/").status_code == 200
        return len(resolved)

    one = lookups()
    for _ in range(49):
        HandoffFactory(state=S.NEEDS_ATTENTION, failure_class=FailureClass.TRANSIENT, attempts=3)
    fifty = lookups()
    # The rows' loop itself resolves `handoffs` and each row's `h` once: a handful, not ~46 a row.
    assert fifty - one <= 2 * 49, (one, fifty)
