"""The receiver's rules, including the race two deliveries of one key run into at the unique constraint."""

import pytest
from django.db import connections, transaction

from delivery.errors import ActionKeyConflict, InvalidTaskPayload
from delivery.models import ReceiverTask
from delivery.services import payload_hash, task_create_idempotent, task_create_many
from tests.locks import held_by_another_session

PAYLOAD = {"client_name": "Northwind"}
KEY = "onboarding:7:42:1"


@pytest.mark.django_db(databases=["default", "delivery"])
def test_invalid_payload_lists_every_reason_and_writes_nothing():
    with pytest.raises(InvalidTaskPayload) as caught:
        task_create_idempotent(action_key="", payload=["not", "an", "object"])
    assert len(caught.value.reasons) == 2
    assert ReceiverTask.objects.count() == 0


@pytest.mark.django_db(databases=["default", "delivery"])
def test_batch_creates_returns_and_conflicts_like_the_single_call():
    existing = task_create_idempotent(action_key=KEY, payload=PAYLOAD).task
    other = {"client_name": "Contoso"}
    with transaction.atomic(using="delivery"):
        results = task_create_many(
            [
                ("onboarding:7:1:1", PAYLOAD),
                (KEY, PAYLOAD),
                (KEY, other),
                ("onboarding:7:2:1", other),
                ("onboarding:7:2:1", other),
                ("onboarding:7:3:1", {"plan": "x"}),
            ]
        )
    assert results[0].created is True
    assert (results[1].created, results[1].task.task_id) == (False, existing.task_id)
    assert isinstance(results[2], ActionKeyConflict)
    assert results[3].created is True and results[4].created is False
    assert results[3].task.task_id == results[4].task.task_id
    assert isinstance(results[5], InvalidTaskPayload)
    assert ReceiverTask.objects.count() == 3
    assert ReceiverTask.objects.get(action_key=KEY).payload_hash == payload_hash(PAYLOAD)


@pytest.mark.postgres
@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
@pytest.mark.parametrize("same_payload", [True, False])
def test_concurrent_insert_of_the_same_key_resolves_at_the_unique_constraint(same_payload):
    """The other insert is not yet committed when this call reads, so the call only meets it at the
    unique index: it waits there, gets IntegrityError, and must end as if it had seen the row."""
    if connections["delivery"].vendor != "postgresql":
        pytest.fail(
            "needs PostgreSQL (row-level waits at the unique index); `make test` runs it there"
        )
    out = {}

    def insert():
        out["task"] = ReceiverTask.objects.using("delivery").create(
            action_key=KEY, payload=PAYLOAD, payload_hash=payload_hash(PAYLOAD)
        )

    with held_by_another_session("delivery", insert) as seen:
        if same_payload:
            outcome = task_create_idempotent(action_key=KEY, payload=PAYLOAD)
            assert outcome.created is False
            assert outcome.task.task_id == out["task"].task_id
        else:
            with pytest.raises(ActionKeyConflict):
                task_create_idempotent(action_key=KEY, payload={"client_name": "Contoso"})
    assert seen.get("waiting"), "the call must have waited on the other insert"
    assert ReceiverTask.objects.count() == 1
    assert ReceiverTask.objects.get().payload == PAYLOAD
