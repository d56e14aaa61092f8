"""Settlement's words about a key it learnt nothing about say what is known: a receiver a hold kept from being
asked "was not asked", one that was asked and failed "could not answer". Which it was is carried from the
refusal (`LookupFailed.asked`), never read from the error's words."""

import pytest

from outbox.destinations import LookupFailed
from outbox.models import HandoffEvent, HandoffState
from outbox.services import handoff_settle
from tests.factories import retry_after_hold
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


class ReplayingReceiver(ScriptedDestination):
    """The in-process receiver, replaying the original answer to a repeat with the same key and body."""

    replays_same_key = True

    def __init__(self, fails: str | None = None):
        super().__init__()
        self.fails = fails
        self.lookups = 0

    def lookup(self, action_key):
        self.lookups += 1
        if self.fails is not None:
            raise LookupFailed(self.fails)
        return super().lookup(action_key)


def settled_reason(handoff, receiver) -> str:
    assert handoff_settle(handoff_id=handoff.pk, destination=receiver) == S.PENDING
    return HandoffEvent.objects.filter(handoff=handoff).latest("id").reason


def test_a_held_receiver_is_said_not_asked_not_unable_to_answer(make_handoff, monkeypatch):
    from outbox.settlement import asked as settlement

    monkeypatch.setattr(settlement, "PERSON_LOOKUP_WAIT_SECONDS", 0.0)
    handoff = make_handoff(1, state=S.UNCERTAIN)
    retry_after_hold("receiver", 30)
    receiver = ReplayingReceiver()
    reason = settled_reason(handoff, receiver)
    assert receiver.lookups == 0
    assert reason.startswith(
        "receiver was not asked (destination receiver is held (Retry-After hold)"
    )
    assert "could not answer" not in reason and "not asked: " not in reason
    assert reason.endswith("sent again with the same key")


def test_a_receiver_asked_and_failing_could_not_answer(make_handoff):
    handoff = make_handoff(1, state=S.UNCERTAIN)
    receiver = ReplayingReceiver(fails="receiver answered HTTP 500")
    reason = settled_reason(handoff, receiver)
    assert receiver.lookups == 1
    assert reason.startswith("receiver could not answer (receiver answered HTTP 500)")
    assert "was not asked" not in reason


def test_an_asked_receiver_whose_error_reads_not_asked_could_not_answer(make_handoff):
    """The receiver was asked; its failure's words happen to begin as a refusal's: still "could not
    answer", with its words whole (the old code read the words and said "was not asked")."""
    handoff = make_handoff(1, state=S.UNCERTAIN)
    receiver = ReplayingReceiver(fails="not asked: the receiver's own words")
    reason = settled_reason(handoff, receiver)
    assert receiver.lookups == 1
    assert reason.startswith("receiver could not answer (not asked: the receiver's own words)")
    assert "was not asked" not in reason


def test_an_empty_error_is_still_a_failure_not_an_answer(make_handoff):
    """A lookup that failed without words learnt nothing: not taken for "no task for this key"."""
    handoff = make_handoff(1, state=S.UNCERTAIN)
    reason = settled_reason(handoff, ReplayingReceiver(fails=""))
    assert reason.startswith("receiver could not answer ()")
    assert "no task" not in reason
