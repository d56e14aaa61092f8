"""reconciliation/merge.py `receiver_stream` over HTTP asks for the receiver's next page while the merge is
still on the one before (`_pages_read_ahead`): the receiver builds it on the other core instead of the merge
waiting. The pages are still asked in key order, one ahead at most, and a failed listing still ends the
stream with its error. The destination is the HTTP kind with its listing answered in the test (no server)."""

import threading

import pytest

from outbox.destinations import HttpDestination, LookupFailed, RemoteTask
from reconciliation.merge import StreamStats, receiver_stream

KEYS = [f"onboarding:7:{n:03d}:1" for n in range(1, 8)]


class Listing(HttpDestination):
    """The HTTP kind, its `GET /tasks` answered from KEYS; the second page's request is signalled."""

    def __init__(self, fail_after: str | None = None):
        super().__init__(url="http://127.0.0.1:9/delivery/api", signing_secret="whsec_test")
        self.asked: list[str] = []
        self.second_page_asked = threading.Event()
        self.fail_after = fail_after

    def list_keys(self, *, after="", limit=500):
        self.asked.append(after)
        if len(self.asked) == 2:
            self.second_page_asked.set()
        if after == self.fail_after:
            raise LookupFailed("key listing answered HTTP 503")
        return [RemoteTask(key, f"t-{key}", "h", "open") for key in KEYS if key > after][:limit]


def test_the_next_page_is_asked_for_while_the_merge_is_on_the_first():
    destination = Listing()
    stream = receiver_stream(destination, batch_size=3, stats=StreamStats())
    first = next(stream)
    # The merge holds the first key of page one and asks nothing more; the listing of page two is under way.
    assert destination.second_page_asked.wait(timeout=10), (
        "page two was asked only when page one was done"
    )
    rest = list(stream)
    assert [task.action_key for task in [first, *rest]] == KEYS
    # In key order, each page after the last key of the one before, and the empty page ends it.
    assert destination.asked == ["", KEYS[2], KEYS[5], KEYS[6]]


def test_a_failed_listing_ends_the_stream_with_its_error_after_the_pages_before_it():
    destination = Listing(fail_after=KEYS[2])
    seen = []
    with pytest.raises(LookupFailed, match="HTTP 503"):
        for task in receiver_stream(destination, batch_size=3, stats=StreamStats()):
            seen.append(task.action_key)
    assert seen == KEYS[:3]
