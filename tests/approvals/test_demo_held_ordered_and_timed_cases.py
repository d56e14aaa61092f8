"""The demo shows the delivery side of issue 39 (after `make run`, with the routes it loads): one case held by
an operator through the product's hold (request 44, by olga, with her reason, marked on the handoff list), two
approved actions for one client in approval order (request 45 waits behind request 44's step, its ordering
key the client's name), and a step's business times (request 46's first step may not go before its
`start_at`, three days on; every first step must have gone a week after its approval); `workflows check`
passes on the demo's file; a second load adds nothing."""

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from approvals.management.commands import demo as demo_command
from approvals.management.commands.demo import ONBOARDING_STEPS, STEP_CONSTRAINTS
from approvals.models import Request
from approvals.rules import rules_for
from outbox.clock import db_time
from outbox.models import CaseHold, Handoff
from tests.console.clients import client_for, row_of
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _first_step(number: int) -> Handoff:
    return Handoff.objects.get(action_key__startswith=f"onboarding:7:{number}:1", step_index=0)


def _requesters_page(number: int) -> str:
    client = Client()
    client.force_login(get_user_model().objects.get(username="bob"))
    return client.get(reverse("approvals:detail", args=[7, number, 1])).content.decode()


def test_the_demo_shows_a_held_case_an_ordered_client_and_a_step_that_starts_later(monkeypatch):
    monkeypatch.setenv("PORT", "8123")
    destinations = str(ROOT / "demo" / "destinations.json")
    call_command(
        "demo", password="demo-password-long", destinations=destinations, stdout=StringIO()
    )
    now = db_time()

    held, behind, later = _first_step(44), _first_step(45), _first_step(46)
    (hold,) = CaseHold.objects.all()
    assert held.case_hold_id == hold.pk and hold.set_by == "olga" and hold.ended_at is None
    assert (
        hold.reason.startswith("calling Tailspin Toys") and hold.instance_key == held.instance_key
    )
    assert held.order_key == behind.order_key == "Tailspin Toys"
    assert held.order_position < behind.order_position and behind.case_hold_id is None
    assert later.not_before - now > timedelta(days=2, hours=23)
    assert all(
        timedelta(days=6) < h.finish_by - now <= timedelta(days=7) for h in (held, behind, later)
    )
    assert not Handoff.objects.due().filter(pk__in=[held.pk, behind.pk, later.pk]).exists()

    olga = client_for(get_user_model().objects.get(username="olga"))
    page = olga.get("/handoffs/").content.decode()
    assert "held (case hold: calling Tailspin Toys" in row_of(page, f"handoff-{held.pk}")
    assert "a step approved before it for the same ordering key" in _requesters_page(45)
    assert "it may not go before" in _requesters_page(46)

    out = StringIO()
    call_command("demo", password="demo-password-long", destinations=destinations, stdout=out)
    assert "added:" not in out.getvalue()
    assert (
        CaseHold.objects.count() == 1
        and Handoff.objects.filter(workflow="onboarding", step_index=0).count() == 3
    )

    call_command("workflows", "check", str(ROOT / "demo" / "workflows.json"), stdout=StringIO())


def test_a_demo_loaded_before_these_cases_gets_them_and_the_constraints_at_its_next_load(
    monkeypatch,
):
    """`make run` on older demo data: the routed steps it published without the first step's constraints
    are published again with them, and the three cases are added (they are approved under those rules)."""
    monkeypatch.setenv("PORT", "8123")
    destinations = str(ROOT / "demo" / "destinations.json")
    older = [{k: v for k, v in s.items() if k not in STEP_CONSTRAINTS} for s in ONBOARDING_STEPS]
    monkeypatch.setattr(demo_command, "ONBOARDING_STEPS", older)
    call_command("demo", destinations=destinations, stdout=StringIO())
    assert "order_by" not in rules_for("onboarding").steps[0]
    assert not Request.objects.filter(workspace_id=7, number__in=[44, 45, 46]).exists()

    monkeypatch.undo()
    monkeypatch.setenv("PORT", "8123")
    out = StringIO()
    call_command("demo", destinations=destinations, stdout=out)

    assert rules_for("onboarding").steps[0]["order_by"] == {"field": "client_name"}
    assert "added: request 44 approved, its case held by olga" in out.getvalue()
    assert _first_step(45).order_key == "Tailspin Toys" and _first_step(46).not_before is not None
