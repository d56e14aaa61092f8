"""One rule for "held by an operator" (where two features meet: a case hold x incidents): what the alerting
counts as held is `CaseHoldQuerySet.live()`, not a restatement of it, so a change to that rule moves the
incident rule with it. A real failure, the real hold service."""

import pytest
from django.db.models import Q

from incidents.causes import held_by_its_owner
from outbox.models import CaseHold, Handoff
from outbox.models.case_holds import CaseHoldQuerySet
from outbox.services.case_holds import case_hold
from tests.incidents.test_incidents import fail

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_a_change_to_the_live_hold_rule_changes_what_alerting_counts_as_held(world, monkeypatch):
    handoff = fail(1500)
    case_hold(handoff_id=handoff.pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    assert list(Handoff.objects.filter(held_by_its_owner()).values_list("pk", flat=True)) == [
        handoff.pk
    ]

    # The live rule narrowed (say, a hold must also name its reason "audit"): both readers follow it.
    live = CaseHoldQuerySet.live
    monkeypatch.setattr(CaseHoldQuerySet, "live", lambda self: live(self).filter(Q(reason="audit")))
    assert not CaseHold.objects.live().exists()
    assert not Handoff.objects.filter(held_by_its_owner()).exists()
