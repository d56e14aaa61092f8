"""Hold and resume one case from the console and from `manage.py handoffs` (issue 39, "Hold one case"): a
requester is refused alike by both, an operator writes the same events through both and reads the same
words (one module words them), the requester's page says the case is held, by whom and why, and a hold is
never a bulk action."""

import json
from datetime import timedelta

import pytest
from django.contrib.messages import get_messages

from outbox.clock import db_time
from outbox.destinations import InProcessDestination
from outbox.dispatch.claims import handoff_claim_due
from outbox.failures import DeliveryResult
from outbox.models import CaseHold, Handoff, HandoffState
from outbox.services.case_holds import case_hold
from outbox.services.outcomes import handoff_record_outcomes
from tests.builders import approve
from tests.console.cli.test_handoffs_command import (
    assert_refused_alike,
    assert_same_events,
    cli,
    console_post,
    last_event_id,
    rejected_handoff,
)
from tests.console.clients import client_for, row_of

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_hold_and_resume_are_refused_alike_written_alike_and_worded_once(world):
    first, second = approve(world), approve(world, number=43)
    data, args = {"reason": "calling the client"}, ("--reason", "calling the client")
    assert_refused_alike(world, first, "hold", data, *args)
    said = assert_same_events(world, first, second, "hold", data, *args, expected_state=S.PENDING)
    words = f"Held until resumed: {second.action_key}. Nothing of it is sent while it is held"
    assert said.startswith(words), said
    for handoff in (first, second):
        hold = CaseHold.objects.get(handoff_id=handoff.pk)
        assert (hold.set_by, hold.reason, hold.ends_at) == ("olga", "calling the client", None)

    # The requester reads it in words on the request's page.
    page = client_for(world["bob"]).get(f"/handoffs/{first.pk}/").content.decode()
    assert "is held by olga" in page and "calling the client" in page

    assert_refused_alike(world, first, "resume", {})
    said = assert_same_events(world, first, second, "resume", {}, expected_state=S.PENDING)
    assert said.startswith(f"Resumed: {second.action_key}. What is left of it is sent"), said
    assert not Handoff.objects.filter(
        pk__in=[first.pk, second.pk], case_hold__isnull=False
    ).exists()


def test_a_hold_until_a_time_is_read_as_utc_and_a_past_or_garbled_time_is_refused(world):
    handoff = approve(world)
    response = console_post(
        world["olga"], handoff, "hold", {"reason": "cut-over", "until": "2001-01-01 10:00"}
    )
    assert response.status_code == 302
    [message] = [str(m) for m in get_messages(response.wsgi_request)]
    assert message == "Not done: until: the end of a hold must be later than now."
    status, said = cli("hold", str(handoff.pk), "--as", "olga", "--reason", "x", "--until", "soon")
    assert status != 0 and "until: 'soon' is not a time" in said
    assert not CaseHold.objects.exists()
    later = db_time() + timedelta(days=1)
    status, said = cli(
        "hold",
        str(handoff.pk),
        "--as",
        "olga",
        "--reason",
        "x",
        "--until",
        f"{later:%Y-%m-%d %H:%M}",
    )
    assert status == 0 and said.startswith(f"Held until {later:%Y-%m-%d %H:%M} UTC:"), said


def test_a_hold_is_one_case_never_a_filter_s_matches(world):
    approve(world)
    status, said = cli("hold", "--as", "olga", "--state", "pending", "--reason", "x")
    assert status != 0 and "hold names one handoff id" in said
    assert not CaseHold.objects.exists()


def test_resuming_a_handoff_that_needs_attention_says_it_is_not_sent_alike_on_web_and_cli(world):
    """Hold one case x needs attention, web and CLI: resuming a held handoff that needs attention said
    "What is left of it is sent under the same keys", but the resume sends nothing of it (a retry does).
    Both paths write the same events and now say it still needs attention."""
    first, second = rejected_handoff(world, 52), rejected_handoff(world, 53)
    for handoff in (first, second):
        case_hold(handoff_id=handoff.pk, actor=world["olga"], reason="calling", whole_case=False)

    said = assert_same_events(world, first, second, "resume", {}, expected_state=S.NEEDS_ATTENTION)
    assert "What is left of it is sent" not in said
    assert f"{second.action_key} still needs attention: nothing is sent until" in said
    [message] = [
        str(m)
        for m in get_messages(
            console_post(world["olga"], first, "hold", {"reason": "x"}).wsgi_request
        )
    ]
    assert message.startswith("Held until resumed")
    response = console_post(world["olga"], first, "resume", {})
    [message] = [str(m) for m in get_messages(response.wsgi_request)]
    assert f"{first.action_key} still needs attention: nothing is sent until" in message


def test_resuming_a_hold_whose_rows_settled_says_nothing_is_sent_alike_on_web_and_cli(world):
    """A hold set while the handoff's call was under way, the call then delivered: before the sweep ends the
    hold, resuming it from `handoffs resume` (or a posted resume) said "What is left of it is sent", with
    nothing left. Both now say nothing was left, name the settled row, and write the same events."""
    first, second = approve(world, number=54), approve(world, number=55)
    claims = handoff_claim_due(worker="w1")
    assert {c.handoff_id for c in claims} == {first.pk, second.pk}
    for handoff in (first, second):
        case_hold(handoff_id=handoff.pk, actor=world["olga"], reason="calling", whole_case=False)
    handoff_record_outcomes(
        outcomes=[
            (c, DeliveryResult.ok(task_id=f"t-{c.handoff_id}", created=True)) for c in claims
        ],
        destination=InProcessDestination(),
    )
    assert CaseHold.objects.live().count() == 2

    said = assert_same_events(world, first, second, "resume", {}, expected_state=S.DELIVERED)
    assert "What is left of it is sent" not in said
    assert said.startswith(
        f"Resumed: {second.action_key}. Nothing of it was left to send ({second.action_key} delivered)"
    ), said
    response = console_post(world["olga"], first, "resume", {})
    [message] = [str(m) for m in get_messages(response.wsgi_request)]
    assert message == f"Not done: {first.action_key} is not held."
    assert not CaseHold.objects.live().exists()


def test_a_dry_run_retry_of_a_held_handoff_says_it_is_sent_once_resumed_as_the_retry_does(world):
    """The dry run of `handoffs retry` said "Queued with the same action key and sent at once." of a held
    handoff, which the retry queues and sends only at the release (its words, on the web and the CLI: "its
    case is held, so it is sent once resumed"). Now both say the same; the dry run writes nothing."""
    first, second = rejected_handoff(world, 56), rejected_handoff(world, 57)
    for handoff in (first, second):
        case_hold(handoff_id=handoff.pk, actor=world["olga"], reason="calling", whole_case=False)
    mark = last_event_id()
    status, said = cli("retry", str(first.pk), "--as", "olga", "--dry-run", "--reason", "fixed")
    assert status == 0, said
    assert "sent at once" not in said
    assert said.strip() == (
        "Dry run, nothing written. Would be: Queued with the same action key; its case is held, so it "
        "is sent once resumed."
    )
    assert last_event_id() == mark
    status, real = cli("retry", str(second.pk), "--as", "olga", "--reason", "fixed")
    assert status == 0 and real.strip() == said.strip().removeprefix(
        "Dry run, nothing written. Would be: "
    )


def test_list_and_show_say_a_handoff_is_held_as_the_console_does(world):
    """The console's list marks a held row "held (case hold: <reason>, since <time>)" and its page says who
    holds it and what sends it; `handoffs list` and `handoffs show` said nothing of a hold."""
    held, other = approve(world, number=58), approve(world, number=59)
    case_hold(handoff_id=held.pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    page = client_for(world["olga"]).get("/handoffs/").content.decode()
    mark = row_of(page, f"handoff-{held.pk}")
    since = CaseHold.objects.get(handoff_id=held.pk).created_at
    words = f"held (case hold: calling ACME, since {since:%H:%M} UTC)"
    assert words in mark

    status, said = cli("list", "--as", "olga", "--json")
    listed = {r["id"]: r["held"] for r in json.loads(said)["handoffs"]}
    assert status == 0 and listed[held.pk] == words and listed[other.pk] == ""
    status, said = cli("list", "--as", "olga")
    [line] = [x for x in said.splitlines() if held.action_key in x]
    assert line.endswith(words)
    status, said = cli("show", str(held.pk), "--as", "olga")
    assert status == 0
    assert "hold: this step is held by olga since" in said
    assert (
        "calling ACME; nothing of it is sent while it is held; it is sent once an operator" in said
    )


def test_the_hold_form_and_the_command_hold_only_the_step_unless_asked_for_the_whole_case(world):
    """The handoff page's form ticked "every step of workflow instance" in advance while `handoffs hold`
    held the one step unless --whole-case: the same click held more than the command. Both hold the step
    the operator looked at unless asked for more."""
    first, second = approve(world), approve(world, number=43)
    for handoff in (first, second):  # steps of a workflow instance: the page offers the whole case
        Handoff.objects.filter(pk=handoff.pk).update(
            instance_key=f"onboarding:7:{handoff.pk}:1", step="create_client"
        )
    page = client_for(world["olga"]).get(f"/handoffs/{first.pk}/").content.decode()
    box = page[page.index('name="whole_case"') :]
    box = box[: box.index(">")]
    assert "checked" not in box, box
    console_post(world["olga"], first, "hold", {"reason": "calling the client"})
    status, _said = cli("hold", str(second.pk), "--as", "olga", "--reason", "calling the client")
    assert status == 0
    holds = CaseHold.objects.filter(handoff_id__in=[first.pk, second.pk])
    assert [hold.whole_case for hold in holds] == [False, False]
