"""A receiver's task as `remote_task` reads it from an answer item: the common answer is checked inline and
built in one step, and every answer the outbox row cannot hold is still refused with its reason."""

import dataclasses

import pytest

from outbox.destinations.base import RemoteTask, remote_task
from outbox.failures import STATUS_MAX, TASK_ID_MAX, MalformedReceipt

ITEM = {
    "action_key": "onboarding:7:1:1",
    "task_id": "t-1",
    "payload_hash": "h" * 64,
    "status": "open",
}


def test_a_task_is_the_one_the_dataclass_builds_with_every_field():
    task = remote_task(ITEM)
    assert task == RemoteTask(
        action_key="onboarding:7:1:1", task_id="t-1", payload_hash="h" * 64, status="open"
    )
    assert set(vars(task)) == {field.name for field in dataclasses.fields(RemoteTask)}
    assert hash(task) == hash(RemoteTask(**vars(task)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.status = "done"


@pytest.mark.parametrize("status", [None, "", "done", "s" * STATUS_MAX])
def test_a_status_the_row_holds_is_kept_and_none_is_empty(status):
    assert remote_task({**ITEM, "status": status}).status == (status or "")
    assert remote_task({key: ITEM[key] for key in ITEM if key != "status"}).status == ""


def test_a_task_id_as_long_as_the_row_holds_is_kept():
    assert remote_task({**ITEM, "task_id": "t" * TASK_ID_MAX}).task_id == "t" * TASK_ID_MAX


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"task_id": 17}, "task_id is not a text"),
        ({"task_id": None}, "task_id is not a text"),
        ({"task_id": ["t-1"]}, "task_id is not a text"),
        ({"task_id": "t" * (TASK_ID_MAX + 1)}, f"task_id is longer than {TASK_ID_MAX} characters"),
        ({"status": 3}, f"status is not a text of at most {STATUS_MAX} characters"),
        ({"status": ["open"]}, f"status is not a text of at most {STATUS_MAX} characters"),
        (
            {"status": "s" * (STATUS_MAX + 1)},
            f"status is not a text of at most {STATUS_MAX} characters",
        ),
    ],
)
def test_a_task_the_row_cannot_hold_is_refused_with_its_reason(change, reason):
    with pytest.raises(MalformedReceipt) as refused:
        remote_task({**ITEM, **change})
    assert str(refused.value) == reason


@pytest.mark.parametrize("missing", ["task_id", "action_key", "payload_hash"])
def test_a_task_without_a_field_the_reconciliation_compares_is_refused(missing):
    with pytest.raises(KeyError, match=missing):
        remote_task({key: ITEM[key] for key in ITEM if key != missing})


@pytest.mark.parametrize("item", [None, "t-1", ["t-1"], 3])
def test_an_item_that_is_not_an_object_is_refused(item):
    with pytest.raises(TypeError):
        remote_task(item)
