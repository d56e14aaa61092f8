"""A destination's work status by configuration (`work_status`: pulled, pushed, delivered): pulled reads from an
accounts API in a process of its own that counts every read (`work_status_server.py`), recorded through the
status-event service; e-mail done when delivered, with the delivery; a wrong configuration refused naming the
field. Both backends."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone
from django_q.models import Schedule

from console.step_status import Evidence, step_line
from outbox.destinations.registry import destination_named
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.dispatch.wakeups import WORK_PULL_SOON
from outbox.guidance import next_step
from outbox.models import DestinationConfig, Handoff, HandoffEvent, StatusEvent
from outbox.services.destination_configs import DestinationsRefused, destination_configs_apply
from outbox.services.work_pull import handoffs_pull_work_status
from tests.builders import record
from tests.outbox.destinations.smtp_server import SmtpServer
from tests.outbox.destinations.work_status_server import AccountsProcess

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
TOKEN_ENV = "HANDOFF_DEST_PULLED_ACCOUNTS_TOKEN"
PULLED = {
    "source": "pulled",
    "read": {"method": "GET", "path": "/v1/accounts/{receipt_id}"},
    "field": "account.status",
    "done": ["active"],
    "failed": ["closed", "failed"],
    "open": ["pending"],
    "every_seconds": 30,
}


def accounts_entry(url: str, work_status: object = PULLED) -> dict:
    return {
        "name": "accounts",
        "kind": "idempotency_key_http",
        "url": url,
        "auth": {"scheme": "bearer", "token_env": TOKEN_ENV},
        "create": {"method": "POST", "path": "/v1/accounts"},
        "receipt": {"id": "account.id"},
        "work_status": work_status,
    }


@pytest.fixture
def accounts(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "work-status-token")
    server = AccountsProcess()
    try:
        destination_configs_apply(
            document={"destinations": [accounts_entry(server.url)]}, actor_label="test"
        )
        yield server
    finally:
        server.stop()


def delivered_to(destination: str, number: int) -> Handoff:
    """Request `number`'s handoff, sent to `destination` and delivered there."""
    handoff = record(number)
    Handoff.objects.filter(pk=handoff.pk).update(destination=destination)
    state = handoff_deliver(handoff_id=handoff.pk, destination=destination_named(destination))
    assert state == "delivered"
    return Handoff.objects.get(pk=handoff.pk)


def read_long_ago(handoff: Handoff) -> None:
    """Its last read moved past `every_seconds` (instead of waiting that long)."""
    Handoff.objects.filter(pk=handoff.pk).update(
        work_checked_at=F("work_checked_at") - timedelta(seconds=31)
    )


def newest_reason(handoff: Handoff) -> str:
    return HandoffEvent.objects.filter(handoff=handoff).latest("at", "id").reason


def test_a_pulled_status_is_read_every_so_often_until_done_then_no_more(accounts):
    handoff = delivered_to("accounts", 60)
    account = handoff.destination_id
    assert handoff.work_status == ""

    handoffs_pull_work_status()
    handoff.refresh_from_db()
    assert (handoff.work_status, accounts.reads()) == ("open", {account: 1})
    handoffs_pull_work_status()  # read 30 s ago at most: not due
    assert accounts.reads() == {account: 1}

    accounts.set_status(account, "active")
    read_long_ago(handoff)
    run = handoffs_pull_work_status()
    handoff.refresh_from_db()
    assert (run.read, run.recorded, handoff.work_status) == (1, 1, "done")
    assert handoff.work_checked_at is not None
    assert "account.status 'active': the work is done" in newest_reason(handoff)
    assert list(StatusEvent.objects.order_by("id").values_list("status", "result")) == [
        ("open", "applied"),
        ("done", "applied"),
    ]
    read_long_ago(handoff)
    handoffs_pull_work_status()  # done is final: never asked again
    assert accounts.reads() == {account: 2}


def test_a_failed_value_reads_failed(accounts):
    handoff = delivered_to("accounts", 61)
    accounts.set_status(handoff.destination_id, "closed")
    handoffs_pull_work_status()
    handoff.refresh_from_db()
    assert handoff.work_status == "failed"


def test_an_unknown_value_is_recorded_as_unknown_with_the_value_never_guessed(accounts):
    handoff = delivered_to("accounts", 62)
    # "done" is a status of ours, but not one this configuration names: unknown too.
    for value in ("suspended", "done"):
        accounts.set_status(handoff.destination_id, value)
        read_long_ago(handoff) if handoff.work_checked_at else None
        run = handoffs_pull_work_status()
        handoff.refresh_from_db()
        assert (run.unknown, handoff.work_status) == (1, "")
        assert f"account.status '{value}'" in newest_reason(handoff)
        assert "the work is unknown" in newest_reason(handoff)
    events = HandoffEvent.objects.filter(handoff=handoff, action="receiver_event").count()
    read_long_ago(handoff)
    handoffs_pull_work_status()  # the same unknown value again: read, not recorded twice
    assert accounts.reads() == {handoff.destination_id: 3}
    assert HandoffEvent.objects.filter(handoff=handoff, action="receiver_event").count() == events


def test_an_account_gone_is_the_task_gone_and_is_not_read_again(accounts):
    handoff = delivered_to("accounts", 63)
    accounts.forget(handoff.destination_id)
    run = handoffs_pull_work_status()
    handoff.refresh_from_db()
    assert (run.gone, handoff.task_seen, handoff.work_status) == (1, False, "")
    assert "it has no task" in newest_reason(handoff)
    handoffs_pull_work_status()
    assert accounts.reads() == {handoff.destination_id: 1}


def test_a_run_reads_at_most_its_limit_oldest_delivery_first(accounts):
    handoffs = [delivered_to("accounts", number) for number in (64, 65, 66)]
    run = handoffs_pull_work_status(limit=2)
    assert run.read == 2
    assert set(accounts.reads()) == {h.destination_id for h in handoffs[:2]}


def test_an_unreachable_destination_records_nothing_and_is_asked_at_the_next_run(accounts):
    handoff = delivered_to("accounts", 67)
    accounts.stop()
    run = handoffs_pull_work_status()
    handoff.refresh_from_db()
    assert (run.read, run.recorded, handoff.work_checked_at) == (0, 0, None)
    assert "accounts" in run.failed


def test_a_delivery_and_a_read_that_leaves_work_open_ask_for_a_pull_every_seconds_later(
    accounts, settings
):
    settings.HANDOFF_WAKE_ON_COMMIT = True
    earliest = timezone.now() + timedelta(seconds=PULLED["every_seconds"])
    handoff = delivered_to("accounts", 68)
    soon = Schedule.objects.get(name=WORK_PULL_SOON)
    assert (soon.func, soon.schedule_type, soon.repeats) == (
        "outbox.tasks.work_status_pull",
        Schedule.ONCE,
        -1,
    )
    assert earliest <= soon.next_run <= timezone.now() + timedelta(seconds=PULLED["every_seconds"])
    soon.delete()

    handoffs_pull_work_status()  # "pending": still open, read again in every_seconds
    assert Schedule.objects.filter(name=WORK_PULL_SOON).count() == 1
    Schedule.objects.all().delete()
    accounts.set_status(handoff.destination_id, "active")
    read_long_ago(handoff)
    handoffs_pull_work_status()  # done: nothing left to read
    assert not Schedule.objects.filter(name=WORK_PULL_SOON).exists()


def test_an_email_is_done_when_delivered_recorded_with_the_delivery(tmp_path):
    mailbox = SmtpServer(tmp_path / "smtp")
    try:
        destination_configs_apply(
            document={
                "destinations": [
                    {
                        "name": "welcome-mail",
                        "kind": "smtp",
                        "host": "127.0.0.1",
                        "port": mailbox.port,
                        "security": "none",
                        "from_address": "welcome@handoff.example",
                        "to": "contact_email",
                        "subject": "Welcome, $client_name",
                        "body": "Hello $client_name\n",
                        "timeout": 5,
                    }
                ]
            },
            actor_label="test",
        )
        handoff = delivered_to("welcome-mail", 70)
    finally:
        mailbox.stop()
    assert (handoff.work_status, handoff.work_checked_at) == ("done", handoff.delivered_at)
    delivery = HandoffEvent.objects.get(handoff=handoff, to_state="delivered")
    assert "the work is done: delivering it was the work" in delivery.reason


def test_an_email_steps_line_says_message_not_task(tmp_path):
    # Issue 37 item 9: an e-mail step was worded as a receiver's task ("task <b8148…", "the people doing
    # the task"); it is a message, sent once, and sending it was the work.
    mailbox = SmtpServer(tmp_path / "smtp")
    try:
        destination_configs_apply(
            document={
                "destinations": [
                    {
                        "name": "welcome-mail",
                        "kind": "smtp",
                        "host": "127.0.0.1",
                        "port": mailbox.port,
                        "security": "none",
                        "from_address": "welcome@handoff.example",
                        "to": "contact_email",
                        "subject": "Welcome, $client_name",
                        "body": "Hello $client_name\n",
                        "timeout": 5,
                    }
                ]
            },
            actor_label="test",
        )
        handoff = delivered_to("welcome-mail", 71)
        assert len(mailbox.messages()) == 1
    finally:
        mailbox.stop()
    line = step_line("Welcome mail", handoff, Evidence([handoff], now=timezone.now()))
    assert line.text.startswith(f"sent: message {handoff.destination_id[:8]}…")
    assert "accepted by the mail server" in line.text
    assert "task" not in f"{line.text} {line.next} {line.owner}"
    assert line.tone == "yes"
    guidance = next_step(handoff)
    assert f"accepted message {handoff.destination_id}" in guidance.detail
    assert "task" not in f"{guidance.headline} {guidance.detail}"
    assert len(mailbox.messages()) == 1


@pytest.mark.parametrize(
    ("work_status", "named"),
    [
        ({**PULLED, "read": {"method": "GET", "path": "v1/{receipt_id}"}}, "work_status.read.path"),
        ({**PULLED, "read": {"path": "/v1/{account}"}}, "work_status.read.path"),
        ({**PULLED, "read": {"method": "POST", "path": "/v1"}}, "work_status.read.method"),
        ({**PULLED, "done": "active"}, "work_status.done"),
        ({**PULLED, "open": ["active"]}, "work_status.open"),
        ({**PULLED, "every_seconds": 0}, "work_status.every_seconds"),
        ({**PULLED, "colour": "red"}, "work_status.colour"),
        ({k: v for k, v in PULLED.items() if k != "field"}, "work_status.field"),
        ({"source": "guessed"}, "work_status.source"),
        ({"source": "delivered", "field": "x"}, "work_status.field"),
    ],
)
def test_a_wrong_work_status_is_refused_naming_the_field_and_nothing_written(work_status, named):
    entry = accounts_entry("http://127.0.0.1:9", work_status)
    with pytest.raises(DestinationsRefused) as refused:
        destination_configs_apply(document={"destinations": [entry]}, actor_label="test")
    assert f"destinations[0]: destination 'accounts' (idempotency_key_http): {named}" in str(
        refused.value
    )
    assert not DestinationConfig.objects.exists()


def test_an_email_destination_cannot_be_pulled():
    entry = {
        "name": "welcome-mail",
        "kind": "smtp",
        "host": "127.0.0.1",
        "port": 2525,
        "from_address": "welcome@handoff.example",
        "to": "contact_email",
        "subject": "Welcome",
        "body": "Hello\n",
        "work_status": PULLED,
    }
    with pytest.raises(DestinationsRefused, match=r"work_status.source: a smtp destination"):
        destination_configs_apply(document={"destinations": [entry]}, actor_label="test")
