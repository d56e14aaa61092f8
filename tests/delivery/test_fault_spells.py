"""The receiver's scheduled spells (delivery/faults.py "spells"): while a kind is in force every create call
gets it, not once per key; once the spell ends the same key is answered truly."""

import pytest

from delivery.faults import MALFORMED_RECEIPT
from delivery.models import FiredFault, ReceiverTask
from tests.delivery.test_api import KEY, post, task_body

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _in_force(path, *kinds: str) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(" ".join(kinds) + "\n")
    partial.replace(path)


def test_a_401_spell_refuses_every_call_while_it_lasts_and_none_after(client, settings, tmp_path):
    spells = tmp_path / "spells"
    settings.RECEIVER_FAULTS = {"spells": str(spells)}
    _in_force(spells, "http_401")
    assert [post(client, task_body()).status_code for _ in range(3)] == [401, 401, 401]
    assert not ReceiverTask.objects.exists()
    _in_force(spells)
    assert post(client, task_body()).status_code == 201
    assert ReceiverTask.objects.filter(action_key=KEY).count() == 1
    assert list(FiredFault.objects.values_list("kind", flat=True)) == ["http_401"]


def test_a_lying_spell_answers_every_create_with_a_false_receipt_then_the_true_one(
    client, settings, tmp_path
):
    spells = tmp_path / "spells"
    settings.RECEIVER_FAULTS = {"spells": str(spells)}
    _in_force(spells, "malformed")
    answers = [post(client, task_body()) for _ in range(2)]
    assert [(a.status_code, a.json()) for a in answers] == [(200, MALFORMED_RECEIPT)] * 2
    assert ReceiverTask.objects.filter(action_key=KEY).count() == 1, "the task is made, once"
    spells.unlink()
    true = post(client, task_body())
    assert true.json()["task_id"] == str(ReceiverTask.objects.get(action_key=KEY).task_id)
