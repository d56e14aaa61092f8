"""reconciliation/selectors/scope.py: the workspaces in scope of a read."""

import pytest

from outbox.models import HandoffState
from reconciliation import selectors
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_scoped_reads_take_none_for_every_workspace(db):
    HandoffFactory(workspace_id=7), HandoffFactory(workspace_id=8)
    assert selectors.handoffs_scoped(None).count() == 2
    assert selectors.handoffs_scoped([8]).count() == 1
