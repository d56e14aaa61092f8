"""The findings page names the last run that covered what it shows: with a workspace chosen, that
workspace's own run when it is newer than the last full one (it named the last full run)."""

import pytest

from tests.console.clients import client_for
from tests.factories import ReconciliationRunFactory, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_the_findings_page_names_the_last_run_of_the_chosen_workspace():
    world = onboarding_world()
    full = ReconciliationRunFactory()
    own = ReconciliationRunFactory(workspace_id=7)
    olga = client_for(world["olga"])
    chosen = olga.get("/reconciliation/findings/", {"workspace": "7"}).content.decode()
    assert f"/reconciliation/runs/{own.pk}/" in chosen and f"#{own.pk}</a>" in chosen
    unchosen = olga.get("/reconciliation/findings/").content.decode()
    assert f"#{full.pk}</a>" in unchosen
