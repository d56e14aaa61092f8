"""The health page builds its destinations' annotated rows (a Retry-After hold and the breaker: seven subqueries)
once per process, not per page, and the alert channels' paused destinations only when a channel is in view
(issue 40: building them was a sixth of the page's CPU). What it says stays as it was: a Retry-After hold
begun after a page shows on the next."""

import pytest

from outbox.models.destinations import DestinationHealthQuerySet
from tests.console.clients import client_for
from tests.console.test_health_hold import _hold_cell, _receiver_answers_retry_after

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_a_second_health_page_builds_no_breaker_annotation_and_shows_a_new_hold(world, monkeypatch):
    client = client_for(world["olga"])
    _receiver_answers_retry_after(0.001)  # the receiver's row, its hold over at once
    before = client.get("/health/")
    assert before.status_code == 200
    assert "held" not in _hold_cell(before.content.decode())
    built = []
    with_breaker = DestinationHealthQuerySet.with_breaker

    def counting(self):
        built.append(1)
        return with_breaker(self)

    monkeypatch.setattr(DestinationHealthQuerySet, "with_breaker", counting)
    _receiver_answers_retry_after(600)
    after = client.get("/health/")
    assert after.status_code == 200
    assert _hold_cell(after.content.decode()).startswith("held since ")
    # Before: the overview's rows and the alert channels' paused destinations, built at every page.
    assert built == []
