"""reconciliation/selectors/needing_person.py: "needs a person", and the header's bounded count."""

import pytest

from outbox.models import Handoff, HandoffState
from reconciliation import selectors
from reconciliation.models import FindingStatus
from tests.factories import FindingFactory, HandoffFactory, make_workspace

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_needing_person_is_needs_attention_uncertain_or_any_handoff_with_a_live_finding(db):
    make_workspace(7), make_workspace(8)
    attention, uncertain = (
        HandoffFactory(state=S.NEEDS_ATTENTION),
        HandoffFactory(state=S.UNCERTAIN),
    )
    with_finding = HandoffFactory(state=S.DELIVERED)
    FindingFactory(action_key=with_finding.action_key, status=FindingStatus.ACKNOWLEDGED)
    resolved = HandoffFactory(state=S.DELIVERED)
    FindingFactory(action_key=resolved.action_key, status=FindingStatus.RESOLVED)
    HandoffFactory(state=S.PENDING)
    assert set(selectors.needing_person(Handoff.objects.all())) == {
        attention,
        uncertain,
        with_finding,
    }
    # The header's count is the same set, counted in two indexed parts.
    assert selectors.needing_person_counts_bounded([7, 8]) == {7: 3}


def test_needing_person_counts_bounded_stop_past_the_cap_per_workspace(db):
    make_workspace(7), make_workspace(8), make_workspace(9)
    HandoffFactory.create_batch(3, state=S.NEEDS_ATTENTION)
    HandoffFactory(state=S.UNCERTAIN)
    with_finding = HandoffFactory(state=S.DELIVERED)
    FindingFactory(action_key=with_finding.action_key)
    HandoffFactory(state=S.NEEDS_ATTENTION, workspace_id=8)
    HandoffFactory(state=S.PENDING, workspace_id=9)
    assert selectors.needing_person_counts_bounded([7, 8, 9]) == {7: 5, 8: 1}
    # Past the cap each part stops at cap + 1 rows, and the figure says "more than cap".
    assert selectors.needing_person_counts_bounded([7, 8], cap=2) == {7: 3, 8: 1}
    assert selectors.needing_person_counts_bounded([]) == {}


def test_a_count_past_the_cap_reads_999_plus():
    from console.templatetags.console_pages import bounded_count

    assert selectors.COUNT_CAP == 999
    assert [bounded_count(n) for n in (0, 999, 1000, None)] == [0, 999, "999+", None]


def test_open_counts_are_handoffs_needing_a_person_per_workspace_including_live_findings(db):
    make_workspace(7), make_workspace(8)
    HandoffFactory(state=S.NEEDS_ATTENTION)
    HandoffFactory(state=S.UNCERTAIN)
    HandoffFactory(state=S.PENDING)
    delivered = HandoffFactory(state=S.DELIVERED)
    FindingFactory(action_key=delivered.action_key)
    HandoffFactory(state=S.NEEDS_ATTENTION, workspace_id=8)
    assert selectors.needing_person_counts_bounded([7]) == {7: 3}
    assert selectors.needing_person_counts_bounded([7, 8]) == {7: 3, 8: 1}
