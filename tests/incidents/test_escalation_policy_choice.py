"""Which escalation policy an incident's pages follow: its workspaces' strictest, else the every-workspace
row, else the settings -- the same on SQLite and PostgreSQL (the choice once rested on the order of NULLs,
first on SQLite and last on PostgreSQL, and on the lowest workspace id rather than the strictest)."""

import pytest
from django.test import override_settings

from incidents.models import EscalationPolicy

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def choose(workspaces):
    return EscalationPolicy.objects.for_workspaces(workspaces)


def test_a_workspaces_own_policy_wins_over_the_every_workspace_row():
    EscalationPolicy.objects.create(workspace_id=None, ack_timeout_seconds=600, max_pages=3)
    EscalationPolicy.objects.create(workspace_id=7, ack_timeout_seconds=1200, max_pages=2)
    assert choose([7]) == (1200, 2)
    assert choose([8]) == (600, 3)


def test_of_two_workspaces_the_strictest_policy_wins_not_the_lowest_id():
    EscalationPolicy.objects.create(workspace_id=None, ack_timeout_seconds=60, max_pages=9)
    EscalationPolicy.objects.create(workspace_id=3, ack_timeout_seconds=900, max_pages=4)
    EscalationPolicy.objects.create(workspace_id=5, ack_timeout_seconds=300, max_pages=2)
    EscalationPolicy.objects.create(workspace_id=6, ack_timeout_seconds=300, max_pages=5)
    assert choose([3, 5]) == (300, 2)
    assert choose([3, 5, 6]) == (300, 5)
    assert choose([3]) == (900, 4)


@override_settings(ALERT_ESCALATION_SECONDS=123, ALERT_ESCALATION_MAX_PAGES=7)
def test_no_policy_row_follows_the_settings():
    assert choose([1]) == (123, 7)
