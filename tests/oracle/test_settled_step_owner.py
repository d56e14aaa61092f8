"""A request whose first step is settled with nothing more to happen (its task deleted at the receiver, a
person's repair accounting for it) while its later steps wait for the receiver's workers (found by the oracle's
fault run, seed 541143022, look 8): the request's line names the workers as the owner of its next step on the
requester's pages, as the truth does (the first step someone owns), and every claim is true. Both backends."""

import pytest

from delivery.services import task_delete
from outbox.dispatch.dispatcher import drain
from outbox.models import Handoff
from reconciliation.services import reconciliation_run
from reconciliation.services.repairs import manual_repair_record
from tests.builders import approve
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true, claims_in
from tests.oracle.screens import render_every_screen
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
INSTANCE = "onboarding:7:42:1"


def test_a_request_past_a_step_settled_by_a_repair_is_its_workers_on_every_screen():
    world = three_step_onboarding_world()
    request = approve(world).source_id
    drain()
    first = Handoff.objects.get(action_key=f"{INSTANCE}:create_client")
    task_delete(action_key=first.action_key)
    reconciliation_run()
    manual_repair_record(actor=world["olga"], what_was_done="checked by hand", handoff_id=first.pk)

    pages = render_every_screen({"requester": world["bob"]})
    assert_pages_true(pages, Truth(receiver_destinations=frozenset({"receiver"})))
    owners = {
        (url, c.value)
        for url, html in pages.items()
        for c in claims_in(url, html)
        if c.name == "request.next_owner" and c.subject == f"request:{request}"
    }
    assert {url for url, _ in owners} == {
        "requester /approvals/mine/",
        "requester /approvals/7/42/1/",
    }
    assert {value for _, value in owners} == {"workers"}
