"""`manage.py handoffs` against the console: for every subcommand, a user without the role gets the console's
refusal (and the command exits non-zero), and a user with it writes the console's audit events.

Each comparison runs the same action once through the console (the Django test client, signed in) and once
through the command, on two handoffs in the same state, and compares the events each wrote (action, actor,
from, to)."""

import html
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff, HandoffEvent, HandoffState
from tests.builders import approve
from tests.console.clients import HTMX, client_for
from tests.factories import ONBOARDING_PAYLOAD

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
NOT_OPERATOR = (
    "Not allowed: handoff actions need the operator role in workspace 7. Ask an operator, or an "
    "administrator for the role."
)


def cli(*args: str) -> tuple[int, str]:
    """The command's exit status and what it printed (stdout, then the refusal's words)."""
    out = StringIO()
    try:
        call_command("handoffs", *args, stdout=out)
    except CommandError as refused:
        return refused.returncode, out.getvalue() + str(refused)
    return 0, out.getvalue()


def console_post(user, handoff: Handoff, action: str, data: dict | None = None):
    return client_for(user).post(f"/handoffs/{handoff.pk}/{action}", data or {})


def events(handoff: Handoff, after: int = 0) -> list[tuple]:
    return [
        (e.action, e.actor.username if e.actor else e.actor_label, e.from_state, e.to_state)
        for e in HandoffEvent.objects.filter(handoff=handoff, id__gt=after).order_by("id")
    ]


def last_event_id() -> int:
    return HandoffEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def rejected_handoff(world, number: int) -> Handoff:
    handoff = approve(world, number=number, payload={**ONBOARDING_PAYLOAD, "client_name": "   "})
    handoff_deliver(handoff_id=handoff.pk)
    handoff.refresh_from_db()
    assert handoff.state == S.NEEDS_ATTENTION
    return handoff


def uncertain_handoff(world, number: int) -> Handoff:
    handoff = approve(world, number=number)
    handoff_deliver(
        handoff_id=handoff.pk, destination=InProcessDestination(lose_ack_for={handoff.action_key})
    )
    handoff.refresh_from_db()
    assert handoff.state == S.UNCERTAIN
    return handoff


def assert_refused_alike(world, handoff, action, data, *args):
    """bob (a requester of workspace 7: he sees the handoff, he is no operator) is refused by both, in the
    same words, and nothing is written."""
    before = last_event_id()
    response = console_post(world["bob"], handoff, action, data)
    assert response.status_code == 403
    assert html.escape(NOT_OPERATOR) in response.content.decode()
    status, said = cli(action, str(handoff.pk), "--as", "bob", *args)
    assert status == 3 and said == NOT_OPERATOR
    assert last_event_id() == before
    handoff.refresh_from_db()
    return handoff


def assert_same_events(world, through_console, through_cli, action, data, *args, expected_state):
    mark = last_event_id()
    response = console_post(world["olga"], through_console, action, data)
    assert response.status_code == 302, response.content[:500]
    status, said = cli(action, str(through_cli.pk), "--as", "olga", *args)
    assert status == 0, said
    written = events(through_console, mark)
    assert written and written == events(through_cli, mark)
    assert any(e[0] == action and e[1] == "olga" for e in written), written
    for handoff in (through_console, through_cli):
        handoff.refresh_from_db()
        assert handoff.state == expected_state
    return said


@pytest.mark.parametrize("action", ["retry", "acknowledge", "cancel"])
def test_an_action_on_a_rejected_handoff_is_refused_alike_and_audited_alike(world, action):
    first, second = rejected_handoff(world, 50), rejected_handoff(world, 51)
    data = {"reason": "checked with the client"}
    args = ("--reason", "checked with the client")
    assert_refused_alike(world, first, action, data, *args)
    expected = {"retry": S.NEEDS_ATTENTION, "acknowledge": S.NEEDS_ATTENTION, "cancel": S.CANCELLED}
    said = assert_same_events(
        world, first, second, action, data, *args, expected_state=expected[action]
    )
    if action == "acknowledge":
        assert said.strip() == "Acknowledged by olga."


def test_reconcile_is_refused_alike_and_audited_alike(world):
    first, second = uncertain_handoff(world, 60), uncertain_handoff(world, 61)
    assert_refused_alike(world, first, "reconcile", {})
    said = assert_same_events(world, first, second, "reconcile", {}, expected_state=S.DELIVERED)
    assert said.startswith("Reconciled: ") and said.strip().endswith("Delivered.")


def test_assign_is_refused_alike_and_audited_alike(world):
    first, second = approve(world), approve(world, number=43)
    assert_refused_alike(world, first, "assign", {"owner": world["oscar"].pk}, "--to", "oscar")
    assert_same_events(
        world,
        first,
        second,
        "assign",
        {"owner": world["oscar"].pk},
        "--to",
        "oscar",
        expected_state=S.PENDING,
    )
    assert Handoff.objects.get(pk=second.pk).owner == world["oscar"]
    # An owner who is no operator of the workspace: the service's refusal, in the console's words (422).
    words = "Not done: bob is not an operator of workspace 7."
    response = client_for(world["olga"]).post(
        f"/handoffs/{second.pk}/assign", {"owner": world["bob"].pk}, **HTMX
    )
    assert response.status_code == 422 and html.escape(words) in response.content.decode()
    assert cli("assign", str(second.pk), "--as", "olga", "--to", "bob") == (6, words)


def test_show_outside_the_workspaces_is_no_such_handoff_and_reading_writes_nothing(world, foreign):
    mine = approve(world)
    before = last_event_id()
    assert client_for(world["olga"]).get(f"/handoffs/{foreign.pk}/").status_code == 404
    assert cli("show", str(foreign.pk), "--as", "olga") == (4, "no such handoff")
    assert client_for(world["olga"]).get(f"/handoffs/{mine.pk}/").status_code == 200
    status, said = cli("show", str(mine.pk), "--as", "olga", "--json")
    page = json.loads(said)
    assert status == 0 and page["action_key"] == mine.action_key and page["ok"]
    assert [e["to"] for e in page["events"]] == [to for *_, to in events(mine)]
    assert "retry" not in page["actions"]  # pending: a retry is not offered, run now is
    assert last_event_id() == before


def test_list_shows_what_the_console_lists_with_its_filters(world, foreign):
    rejected, pending = rejected_handoff(world, 50), approve(world)
    before = last_event_id()
    page = (
        client_for(world["olga"]).get("/handoffs/", {"state": "needs_attention"}).content.decode()
    )
    status, said = cli("list", "--as", "olga", "--state", "needs_attention", "--json")
    listed = json.loads(said)["handoffs"]
    assert status == 0 and [r["id"] for r in listed] == [rejected.pk]
    assert rejected.action_key in page and pending.action_key not in page
    # A workspace the user is not in: the console's filter refuses the value, and so does the command.
    assert foreign.action_key not in client_for(world["olga"]).get("/handoffs/").content.decode()
    status, said = cli("list", "--as", "olga", "--workspace", "8")
    assert status == 6 and said.startswith(
        "Nothing was done: workspace '8': Select a valid choice."
    )
    # mallory (workspace 8 only) lists nothing of workspace 7.
    status, said = cli("list", "--as", "mallory", "--json")
    assert {r["id"] for r in json.loads(said)["handoffs"]} == {foreign.pk}
    assert last_event_id() == before


def test_an_unknown_or_inactive_user_is_not_acted_as(world, pending):
    world["olga"].is_active = False
    world["olga"].save()
    for name in ("olga", "nobody-here"):
        status, said = cli("retry", str(pending.pk), "--as", name)
        assert status == 3 and said == f"Not allowed: no active user named {name!r}."


def test_dry_run_reports_the_move_and_writes_nothing(world):
    handoff = rejected_handoff(world, 50)
    before = last_event_id()
    status, said = cli("cancel", str(handoff.pk), "--as", "olga", "--dry-run", "--reason", "dup")
    assert status == 0 and said.startswith("Dry run, nothing written. Would be: Cancelled.")
    status, said = cli("cancel", str(handoff.pk), "--as", "olga", "--dry-run")
    assert status == 6 and said == "Not done: a reason is required to cancel a handoff."
    status, said = cli("retry", str(handoff.pk), "--as", "olga", "--dry-run")
    assert status == 0 and "Would be: Queued" in said
    handoff.refresh_from_db()
    assert handoff.state == S.NEEDS_ATTENTION and handoff.attempts == 1
    assert last_event_id() == before


def test_a_risky_retry_needs_the_confirmation_the_console_asks_for(world):
    handoff = uncertain_handoff(world, 60)
    status, said = cli("retry", str(handoff.pk), "--as", "olga")
    assert status == 7 and "the last outcome is unknown" in said and "--confirm-risk" in said
    assert cli("retry", str(handoff.pk), "--as", "olga", "--confirm-risk")[0] == 0
    assert ("retry", "olga", S.UNCERTAIN, S.NEEDS_ATTENTION) in events(handoff)


def test_bulk_previews_and_applies_as_the_console_does(world):
    first, second = rejected_handoff(world, 50), rejected_handoff(world, 51)
    filters = {"state": "needs_attention", "bulk_action": "acknowledge"}
    refused = client_for(world["bob"]).post("/handoffs/bulk", filters)
    words = "Bulk actions need the operator role in a workspace; you have none."
    # The console answers 403 (its page then offers no bulk panel at all); the command says why.
    assert refused.status_code == 403
    args = ("acknowledge", "--state", "needs_attention")
    assert cli(*args, "--as", "bob") == (3, words)
    status, said = cli(*args, "--as", "olga", "--dry-run", "--json")
    preview = json.loads(said)
    assert status == 0 and (preview["count"], preview["upto"]) == (2, second.pk)
    assert not HandoffEvent.objects.filter(action="acknowledge").exists()
    status, said = cli(*args, "--as", "olga")
    assert (
        status == 0 and said.strip() == "Acknowledge 2 of 2 matching handoffs."
    )  # the console's words
    assert (
        events(first)[-1]
        == events(second)[-1]
        == ("acknowledge", "olga", S.NEEDS_ATTENTION, S.NEEDS_ATTENTION)
    )
