"""Bulk retry, reconcile and assign: every handoff matching the filter, after a count and a confirmation."""

import re

import pytest

from outbox.models import FailureClass, Handoff, HandoffEvent, HandoffState
from tests.console.clients import HTMX, client_for
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def shown_upto(response) -> int:
    return int(re.search(r'name="bulk_upto" value="(\d+)"', response.content.decode()).group(1))


def bulk(user, data):
    return client_for(user).post("/handoffs/bulk", data, **HTMX)


def test_bulk_retry_counts_then_applies_to_every_match_beyond_the_page(world):
    rows = HandoffFactory.create_batch(
        60,
        state=S.NEEDS_ATTENTION,
        failure_class=FailureClass.TRANSIENT,
        reason_code="retries_exhausted",
    )
    HandoffFactory.create_batch(3, state=S.DELIVERED)
    filters = {"state": "needs_attention"}
    preview = bulk(world["olga"], {**filters, "bulk_action": "retry"})
    body = preview.content.decode()
    assert "<strong>60</strong> handoffs match the current filter" in body
    assert "Yes, retry 60 handoffs" in body
    assert Handoff.objects.filter(state=S.NEEDS_ATTENTION).count() == 60, (
        "a preview changes nothing"
    )
    upto = shown_upto(preview)
    assert upto == max(h.pk for h in rows)

    # Arrives after the preview: left alone.
    HandoffFactory.create_batch(1, state=S.NEEDS_ATTENTION, failure_class=FailureClass.TRANSIENT)
    applied = bulk(
        world["olga"],
        {
            **filters,
            "bulk_action": "retry",
            "bulk_confirm": "60",
            "bulk_upto": str(upto),
            "bulk_reason": "receiver restored",
        },
    )
    assert applied.status_code == 200
    assert b"Retried 60 of 60 matching handoffs" in applied.content
    assert Handoff.objects.filter(state=S.PENDING).count() == 60
    assert Handoff.objects.filter(state=S.NEEDS_ATTENTION).count() == 1
    events = HandoffEvent.objects.filter(action="retry", actor=world["olga"])
    assert events.count() == 60 and {e.reason for e in events} == {"receiver restored"}


def test_bulk_retry_skips_handoffs_whose_outcome_is_unknown(world, uncertain, rejected):
    # Settlement could not ask the receiver: it needs a person, and its outcome is still unknown.
    Handoff.objects.filter(pk=uncertain.pk).update(
        state=S.NEEDS_ATTENTION,
        failure_class=FailureClass.UNCERTAIN,
        reason_code="lookup_unsupported",
    )
    applied = bulk(
        world["olga"],
        {
            "state": "attention",
            "bulk_action": "retry",
            "bulk_confirm": "2",
            "bulk_upto": str(max(uncertain.pk, rejected.pk)),
        },
    )
    body = applied.content.decode()
    assert "Retried 1 of 2" in body and "1 skipped: outcome unknown: reconcile these first" in body
    assert Handoff.objects.get(pk=uncertain.pk).state == S.NEEDS_ATTENTION
    assert Handoff.objects.get(pk=rejected.pk).state == S.PENDING


def test_bulk_reconcile_settles_every_matching_uncertain_handoff(world, uncertain):
    preview = bulk(world["olga"], {"state": "uncertain", "bulk_action": "reconcile"})
    assert b"<strong>1</strong> handoff matches" in preview.content
    assert shown_upto(preview) == uncertain.pk
    applied = bulk(
        world["olga"],
        {
            "state": "uncertain",
            "bulk_action": "reconcile",
            "bulk_confirm": "1",
            "bulk_upto": str(uncertain.pk),
        },
    )
    assert b"Reconciled 1 of 1" in applied.content
    assert Handoff.objects.get(pk=uncertain.pk).state == S.DELIVERED
    assert HandoffEvent.objects.filter(
        handoff=uncertain, action="reconcile", actor=world["olga"]
    ).exists()


def test_bulk_assign_to_an_operator(world):
    rows = HandoffFactory.create_batch(4, state=S.NEEDS_ATTENTION)
    owner = str(world["oscar"].pk)
    preview = bulk(world["olga"], {"bulk_action": "assign", "bulk_owner": owner})
    assert "can be assigned to oscar" in preview.content.decode()
    bulk(
        world["olga"],
        {
            "bulk_action": "assign",
            "bulk_owner": owner,
            "bulk_confirm": "4",
            "bulk_upto": str(rows[-1].pk),
        },
    )
    assert set(Handoff.objects.values_list("owner__username", flat=True)) == {"oscar"}
    assert HandoffEvent.objects.filter(action="assign").count() == 4


def test_bulk_assign_skips_workspaces_where_the_owner_is_no_operator(world):
    from approvals.models import Membership, Role

    Membership.objects.create(user=world["olga"], workspace=world["w8"], role=Role.OPERATOR)
    HandoffFactory.create_batch(2, state=S.NEEDS_ATTENTION, workspace_id=7)
    rows = HandoffFactory.create_batch(1, state=S.NEEDS_ATTENTION, workspace_id=8)
    applied = bulk(
        world["olga"],
        {
            "bulk_action": "assign",
            "bulk_owner": str(world["oscar"].pk),
            "bulk_confirm": "3",
            "bulk_upto": str(rows[-1].pk),
        },
    )
    assert b"Assigned 2 of 3" in applied.content
    assert Handoff.objects.get(pk=rows[0].pk).owner is None


def test_bulk_refuses_more_than_the_limit_instead_of_doing_a_part(world, monkeypatch):
    from outbox.services import bulk as bulk_services

    monkeypatch.setattr(bulk_services, "BULK_JOB_LIMIT", 5)
    HandoffFactory.create_batch(6, state=S.NEEDS_ATTENTION)
    preview = bulk(world["olga"], {"bulk_action": "assign"})
    assert b"More than 5 handoffs match" in preview.content
    assert b"bulk_confirm" not in preview.content


def test_bulk_needs_the_operator_role(world, rejected):
    response = bulk(
        world["alice"], {"bulk_action": "retry", "bulk_confirm": "1", "bulk_upto": str(rejected.pk)}
    )
    assert response.status_code == 403
    assert Handoff.objects.get(pk=rejected.pk).state == S.NEEDS_ATTENTION


def test_bulk_unknown_action_is_refused(world):
    assert bulk(world["olga"], {"bulk_action": "delete"}).status_code == 422


def test_bulk_applies_only_to_the_reason_code_the_filter_names(world):
    """The list offers a reason-code filter; a bulk action once dropped it and acted on every handoff."""
    named = HandoffFactory(
        state=S.NEEDS_ATTENTION, failure_class=FailureClass.PERMANENT, reason_code="payload_invalid"
    )
    other = HandoffFactory(
        state=S.NEEDS_ATTENTION,
        failure_class=FailureClass.TRANSIENT,
        reason_code="retries_exhausted",
    )
    filters = {"reason_code": "payload_invalid", "bulk_action": "acknowledge"}
    preview = bulk(world["olga"], filters)
    assert b"<strong>1</strong> handoff matches" in preview.content
    applied = bulk(
        world["olga"], {**filters, "bulk_confirm": "1", "bulk_upto": str(max(named.pk, other.pk))}
    )
    assert applied.status_code == 200
    assert HandoffEvent.objects.filter(action="acknowledge").count() == 1
    assert HandoffEvent.objects.get(action="acknowledge").handoff_id == named.pk


def test_every_filter_the_list_offers_is_kept_by_bulk_actions():
    from console.filters import HandoffFilter
    from console.views.handoff_list import FILTER_FIELDS

    assert set(HandoffFilter.base_filters) <= set(FILTER_FIELDS)
