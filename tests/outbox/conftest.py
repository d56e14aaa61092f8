import pytest

from tests.factories import HandoffFactory


@pytest.fixture
def make_handoff():
    """`make_handoff(n)`: the pending handoff of request n (HandoffFactory with a chosen number)."""

    def make(n: int = 1, workspace_id: int = 7, **fields):
        return HandoffFactory(number=n, workspace_id=workspace_id, **fields)

    return make
