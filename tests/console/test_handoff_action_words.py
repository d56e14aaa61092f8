"""One module words a handoff action's result for the web and the command line: a step that was an e-mail
reads as a message sent, never as a receiver task (issue 37 item 9, issue 36 item 9)."""

from pathlib import Path

import pytest

from console import handoff_action_words
from console.cli import single
from console.views import handoff_actions
from outbox.models import HandoffState
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_an_email_step_sent_again_reads_as_a_message_not_a_task():
    mail = HandoffFactory(
        destination="welcome-mail",
        state=HandoffState.DELIVERED,
        destination_id="<b8148e2a.1@handoff.example>",
    )
    words = handoff_action_words.sent_words(mail, HandoffState.DELIVERED)
    assert words["text"] == "Sent: delivered as message <b8148e2a.1@handoff.example>."
    task = HandoffFactory(state=HandoffState.DELIVERED, destination_id="d7f2c0de")
    words = handoff_action_words.sent_words(task, HandoffState.DELIVERED)
    assert words["text"] == "Sent: delivered as receiver task d7f2c0de."


def test_the_web_and_the_command_line_word_no_action_of_their_own():
    # Both doors call the one module; neither keeps a sentence of its own about a result.
    for door in (single, handoff_actions):
        source = Path(door.__file__).read_text()
        for sentence in ("It will be retried automatically", "Reconciled:", "Acknowledged by"):
            assert sentence not in source, (door.__name__, sentence)
