"""The owner of a request's next step is exactly one owner, derived by the oracle from the request's own rows
and its steps' rows by one rule (`Truth.request_owner`), and every screen names that one: a request waiting
for approval with an approver who may decide it is the approvers', never the operators'; a request whose
steps are all done is nobody's, never the requester's; an approved request in progress is its first
unfinished step's owner. Both backends."""

import pytest

from approvals.models import Request
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true, check_pages, claims_in
from tests.oracle.screens import render_every_screen
from tests.oracle.test_oracle import every_kind_of_evidence, roles
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_every_request_has_exactly_one_next_owner_and_every_screen_names_it():
    world = three_step_onboarding_world()
    every_kind_of_evidence(world)
    truth = Truth()
    owners = {r.number: truth.request_owner(r.pk) for r in Request.objects.all()}
    assert all(len(owner) == 1 for owner in owners.values()), owners
    assert owners[42] == {"none"}  # every step's work done
    assert owners[46] == {"approvers"}  # alice may decide it
    assert owners[47] == {"system"}  # approved, its first step not sent yet
    pages = render_every_screen(roles(world))
    assert_pages_true(pages, truth)
    said = {
        (c.subject, c.value)
        for u, h in pages.items()
        for c in claims_in(u, h)
        if c.name == "request.next_owner"
    }
    for number, owner in owners.items():
        pk = Request.objects.get(number=number).pk
        assert {v for s, v in said if s == f"request:{pk}"} <= owner


@pytest.mark.parametrize(
    ("number", "other"), [(42, "requester"), (46, "operator"), (47, "none"), (47, "requester")]
)
def test_a_screen_naming_another_owner_of_a_request_fails(number, other):
    world = three_step_onboarding_world()
    every_kind_of_evidence(world)
    pk = Request.objects.get(number=number).pk
    page = (
        f'<span data-claim="request.next_owner" data-subject="request:{pk}" data-value="{other}">'
        f"owner: {other}</span>"
    )
    problems, _ = check_pages({"requester /approvals/mine/": page}, Truth())
    assert [p.claim.value for p in problems] == [other]
    assert other not in problems[0].truth
