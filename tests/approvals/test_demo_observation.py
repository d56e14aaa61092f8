"""The demo's observed pilot: a newcomer finds workspace 7's offboarding in observe mode, owned by dana,
with observed cases compared (two agree, one disagreement waiting for the owner) and two not compared."""

from io import StringIO

import pytest
from django.core.management import call_command

from approvals.agreement import agreement_of, brief_of
from approvals.models import Mode, WorkflowMode
from approvals.rules import rules_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_the_demo_starts_offboarding_in_observe_with_compared_cases_and_an_owner():
    call_command("demo", password="demo-password-long", stdout=StringIO())
    assert WorkflowMode.objects.get(workflow="offboarding").mode == Mode.OBSERVE
    assert rules_for("onboarding").version != "offboarding-v1"
    brief = brief_of("offboarding")
    assert brief.owner.username == "dana"
    assert "olga" in brief.exception_path
    results = agreement_of(7, "offboarding-v1")
    assert (results.observed, results.agree, results.disagree, results.unexplained) == (5, 2, 1, 1)
    assert results.not_recorded == 2


def test_a_demo_loaded_before_gets_the_pilot_once():
    call_command("demo", password="demo-password-long", stdout=StringIO())
    out = StringIO()
    call_command("demo", stdout=out)
    assert agreement_of(7, "offboarding-v1").observed == 5
    assert "observed pilot added" not in out.getvalue()
