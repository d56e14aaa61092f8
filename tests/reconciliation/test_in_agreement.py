"""The merge's fast path (reconciliation/classification.py `in_agreement`): a key it lets through is one the
full checks would have left alone too, over every combination of what the two sides can say; and the key
order is checked a page at a time (reconciliation/merge.py `check_key_order`), also across a page boundary."""

from itertools import product

import pytest

from outbox.destinations import RemoteTask
from outbox.models import HandoffState
from reconciliation.classification import in_agreement, may_have_problems
from reconciliation.merge import KeyOrderError, SourceKey, check_key_order
from reconciliation.services.work_status import work_status_changed

STATUSES = ("", "open", "in_progress", "done", "failed")


def every_pair():
    for state, stuck, same_hash, same_task, status, stored, late in product(
        HandoffState.values,
        (False, True),
        (True, False),
        (True, False),
        STATUSES,
        STATUSES,
        (False, True),
    ):
        src = SourceKey("onboarding:7:1:1", 1, state, "h", "t1", stuck, stored, late)
        task = RemoteTask(
            "onboarding:7:1:1", "t1" if same_task else "t2", "h" if same_hash else "x", status
        )
        yield src, task


def test_a_key_in_agreement_has_no_problem_and_no_work_status_to_write():
    agreeing = 0
    for src, task in every_pair():
        if in_agreement(src, task):
            agreeing += 1
            assert not may_have_problems(src, task), (src, task)
            assert not work_status_changed(src, task), (src, task)
    # Delivered, not stuck, same content and task, the stored status reported again and no problem with it:
    # "" and done whether late or not, open and in_progress only when not late.
    assert agreeing == 6


@pytest.mark.parametrize(
    ("status", "late", "agrees"),
    [
        ("open", False, True),
        ("done", True, True),
        ("open", True, False),  # unfinished past the work deadline: a finding
        ("failed", False, False),  # failed work: a finding
    ],
)
def test_the_common_delivered_key_takes_the_fast_path_and_a_work_problem_does_not(
    status, late, agrees
):
    src = SourceKey("k", 1, HandoffState.DELIVERED, "h", "t1", False, status, late)
    assert in_agreement(src, RemoteTask("k", "t1", "h", status)) is agrees


def test_keys_in_order_after_the_last_page_pass():
    check_key_order("receiver", "a", ["b", "c", "d"])
    check_key_order("receiver", "", [])


@pytest.mark.parametrize(
    ("after", "keys", "named"),
    [
        ("a", ["c", "b"], "'b' after 'c'"),  # within a page
        ("c", ["c", "d"], "'c' after 'c'"),  # a page that repeats the key it was asked to follow
        ("d", ["b", "e"], "'b' after 'd'"),  # a page that goes back across the boundary
    ],
)
def test_keys_out_of_order_name_the_pair(after, keys, named):
    with pytest.raises(KeyOrderError, match="code-point order") as raised:
        check_key_order("receiver", after, keys)
    assert f"the receiver listed {named}" in str(raised.value)
