"""The demo's receiver outage (`manage.py demo_receiver_outage`): while it lasts every call of the task API
answers 503 `receiver_unavailable` and stores nothing; it ends by itself at its end, or at once with --end."""

import pytest
from django.core.management import CommandError, call_command

from delivery.models import ReceiverTask
from delivery.outage import switch_file
from tests.delivery.test_api import KEY, get, post, task_body

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture(autouse=True)
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def test_during_an_outage_every_task_call_answers_503_and_stores_nothing(client, capsys):
    call_command("demo_receiver_outage", "--seconds", "60")
    assert "answers 503 to every call until" in capsys.readouterr().out
    created = post(client, task_body())
    assert created.status_code == 503 and created.json() == {"error": "receiver_unavailable"}
    assert get(client, f"/delivery/api/tasks/{KEY}").status_code == 503
    assert get(client, "/delivery/api/tasks?after=&limit=10").status_code == 503
    assert not ReceiverTask.objects.exists()

    call_command("demo_receiver_outage", "--end")
    assert post(client, task_body()).status_code == 201
    assert get(client, f"/delivery/api/tasks/{KEY}").status_code == 200


def test_an_outage_ends_by_itself_at_its_end(client):
    call_command("demo_receiver_outage", "--seconds", "60")
    # Its end passed (the switch holds a time already gone): the receiver answers again.
    switch_file().write_text("1.0\n", encoding="ascii")
    assert post(client, task_body()).status_code == 201


def test_an_outage_needs_a_positive_length():
    with pytest.raises(CommandError, match="positive number of seconds"):
        call_command("demo_receiver_outage", "--seconds", "0")
    assert not switch_file().exists()
