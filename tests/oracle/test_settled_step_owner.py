"""A request whose first step is settled with nothing more to happen (its task deleted at the receiver, a
person's repair accounting for it) while its later steps wait for the receiver's workers (found by the oracle's
fault run, seed 541143022, look 8): the request's line names the workers as the owner of its next step on the
requester's pages, as the truth does (the first step someone owns), and every claim is true. Both backends."""

import re

import pytest

from delivery.services import task_delete, task_status_set
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
    pages = _step_one_deleted_and_repaired_then_rendered(world)
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


def test_a_request_whose_every_step_left_is_settled_says_so_and_that_no_one_needs_to_act():
    """The same repair on step 1, but steps 2 and 3 done: no step left is owned by anyone. The request is not
    "in progress at step 1" with no owner named: its line says it ended, what happened to step 1 (the task
    deleted, when reconciliation found it missing, the person's repair and when), and that no one needs to
    act, on both of the requester's pages; its next owner is nobody, as the truth's."""
    world = three_step_onboarding_world()
    request = approve(world).source_id
    drain()
    for name in ("provision_account", "send_welcome_pack"):
        task_status_set(action_key=f"{INSTANCE}:{name}", status="done")
    pages = _step_one_deleted_and_repaired_then_rendered(world)
    for url in ("requester /approvals/mine/", "requester /approvals/7/42/1/"):
        line = _request_line(pages[url])
        assert "In progress" not in line and "in progress" not in line, (url, line)
        assert "ended, not every step" in line, (url, line)
        assert "step 1 of 3: create_client: task deleted at the receiver" in line, (url, line)
        assert "olga recorded a manual repair at" in line and "checked by hand" in line, (url, line)
        assert "Next: nothing more happens and no one needs to act" in line, (url, line)
        assert "owner:" not in line, (url, line)
        [owner] = [
            c.value
            for c in claims_in(url, pages[url])
            if c.name == "request.next_owner" and c.subject == f"request:{request}"
        ]
        assert owner == "none", (url, owner)


def _request_line(html: str) -> str:
    """The request's own line (its `data-line="request"` paragraph), tags and spacing dropped."""
    found = re.search(r'data-line="request">(.*?)</p>', html, re.S)
    assert found, "no request line"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def _step_one_deleted_and_repaired_then_rendered(world) -> dict[str, str]:
    """Step 1's task deleted at the receiver, found missing by reconciliation and accounted for by olga's
    repair; then the requester's every screen, each claim checked against the truth."""
    first = Handoff.objects.get(action_key=f"{INSTANCE}:create_client")
    task_delete(action_key=first.action_key)
    reconciliation_run()
    manual_repair_record(actor=world["olga"], what_was_done="checked by hand", handoff_id=first.pk)
    pages = render_every_screen({"requester": world["bob"]})
    assert_pages_true(pages, Truth(receiver_destinations=frozenset({"receiver"})))
    return pages
