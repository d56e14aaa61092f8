"""reconciliation/selectors/links.py: links to the lists behind a figure."""

import pytest

from outbox.models import HandoffState
from reconciliation import selectors

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_list_links_carry_only_the_filters_given():
    assert selectors.handoff_list_url() == "/handoffs/"
    assert (
        selectors.handoff_list_url(state="pending", workspace=None, q="")
        == "/handoffs/?state=pending"
    )
    assert selectors.findings_url(kind="stuck", workspace=7).endswith("?kind=stuck&workspace=7")
