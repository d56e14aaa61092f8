"""The people doing a task move its status forward through the signed API; lookup and listing report it."""

import json

import pytest
from django.core.management import CommandError, call_command

from delivery.models import ReceiverTask, SeenMessage, TaskStatus
from delivery.services import task_create_idempotent, task_status_set
from outbox.signing import signed_headers

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

KEY = "onboarding:7:42:1"
PAYLOAD = {"client_name": "Northwind Traders", "plan": "standard"}
URL = "/delivery/api/tasks"


def _extra(headers: dict) -> dict:
    return {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}


def post_status(
    client,
    status: object,
    key: str = KEY,
    headers: dict | None = None,
    body: str | None = None,
    content_type: str = "application/json",
):
    text = json.dumps({"status": status}) if body is None else body
    signed = signed_headers(text) if headers is None else headers
    return client.post(
        f"{URL}/{key}/status", data=text, content_type=content_type, **_extra(signed)
    )


def get(client, path: str):
    return client.get(path, **_extra(signed_headers("")))


def stored_status(key: str = KEY) -> str:
    return ReceiverTask.objects.get(action_key=key).status


@pytest.fixture
def task():
    return task_create_idempotent(action_key=KEY, payload=dict(PAYLOAD)).task


def test_status_report_moves_task_forward_and_answers_with_the_task(client, task):
    response = post_status(client, "in_progress")
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "task_id": str(task.task_id),
        "action_key": KEY,
        "status": "in_progress",
        "previous_status": "open",
        "changed": True,
    }
    assert stored_status() == "in_progress"
    assert ReceiverTask.objects.get(action_key=KEY).status_changed_at is not None


def test_open_task_may_go_straight_to_done_or_failed(client, task):
    task_create_idempotent(action_key="onboarding:7:43:1", payload=dict(PAYLOAD))
    assert post_status(client, "done").status_code == 200
    assert post_status(client, "failed", key="onboarding:7:43:1").status_code == 200
    assert (stored_status(), stored_status("onboarding:7:43:1")) == ("done", "failed")


@pytest.mark.parametrize(
    ("reached", "back"),
    [
        ("in_progress", "open"),
        ("done", "in_progress"),
        ("done", "failed"),
        ("failed", "done"),
        ("failed", "in_progress"),
    ],
)
def test_status_never_moves_backwards_or_between_final_states(client, task, reached, back):
    task_status_set(action_key=KEY, status=reached)
    response = post_status(client, back)
    assert response.status_code == 422
    assert response.json()["error"] == (
        "status_invalid" if back == "open" else "status_not_forward"
    )
    assert stored_status() == reached


def test_repeated_report_of_the_same_status_answers_200_and_changes_nothing(client, task):
    assert post_status(client, "done").json()["changed"] is True
    again = post_status(client, "done")
    assert again.status_code == 200
    assert again.json()["changed"] is False and again.json()["status"] == "done"
    assert stored_status() == "done"


@pytest.mark.parametrize("status", ["finished", "", None, 3, ["done"], "DONE"])
def test_unknown_status_answers_422_and_changes_nothing(client, task, status):
    response = post_status(client, status)
    assert response.status_code == 422
    assert response.json()["error"] == "status_invalid"
    assert stored_status() == "open"


def test_unknown_key_answers_404(client, task):
    response = post_status(client, "done", key="onboarding:7:999:1")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert stored_status() == "open"


def test_status_report_needs_a_signature(client, task):
    response = post_status(client, "done", headers={})
    assert response.status_code == 401
    assert stored_status() == "open"


def test_status_report_signed_over_another_body_answers_401(client, task):
    response = post_status(
        client, "done", headers=signed_headers(json.dumps({"status": "in_progress"}))
    )
    assert response.status_code == 401
    assert stored_status() == "open"


def test_replayed_status_report_answers_401(client, task):
    body = json.dumps({"status": "in_progress"})
    headers = signed_headers(body)
    assert post_status(client, "in_progress", headers=headers, body=body).status_code == 200
    replay = post_status(client, "in_progress", headers=headers, body=body)
    assert replay.status_code == 401
    assert replay.json()["detail"] == "replayed message id"


@pytest.mark.parametrize(
    ("body", "content_type", "status", "error"),
    [
        ("{not json", "application/json", 400, "malformed_json"),
        ('["done"]', "application/json", 400, None),
        ('{"status": NaN}', "application/json", 400, None),
        ('{"status": "done"}', "text/plain", 415, "unsupported_media_type"),
    ],
)
def test_unreadable_status_report_is_refused_and_changes_nothing(
    client, task, body, content_type, status, error
):
    response = post_status(client, None, body=body, content_type=content_type)
    assert response.status_code == status, response.json()
    if error:
        assert response.json()["error"] == error
    assert stored_status() == "open"


def test_oversized_status_report_answers_413_before_the_signature_is_read(client, task, settings):
    body = json.dumps({"status": "done", "pad": "x" * (settings.RECEIVER_MAX_BODY_BYTES + 1)})
    response = post_status(client, None, body=body)
    assert response.status_code == 413
    assert stored_status() == "open"
    assert SeenMessage.objects.count() == 0


def test_lookup_reports_the_status_the_people_doing_the_task_set(client, task):
    assert get(client, f"{URL}/{KEY}").json()["status"] == "open"
    post_status(client, "in_progress")
    assert get(client, f"{URL}/{KEY}").json()["status"] == "in_progress"


def test_key_listing_carries_each_tasks_status(client, task):
    task_create_idempotent(action_key="onboarding:7:43:1", payload=dict(PAYLOAD))
    task_status_set(action_key="onboarding:7:43:1", status="failed")
    items = get(client, f"{URL}?limit=10").json()["items"]
    assert [(i["action_key"], i["status"]) for i in items] == [
        (KEY, "open"),
        ("onboarding:7:43:1", "failed"),
    ]


def test_lookup_of_a_key_ending_in_status_is_still_a_lookup(client):
    task_create_idempotent(action_key="odd:7:1:1/status", payload=dict(PAYLOAD))
    response = get(client, f"{URL}/odd:7:1:1/status")
    assert response.status_code == 200
    assert response.json()["action_key"] == "odd:7:1:1/status"


def test_task_status_command_moves_the_status_and_refuses_a_backward_move(task, capsys):
    call_command("task_status", KEY, "in_progress")
    assert "open -> in_progress" in capsys.readouterr().out
    assert stored_status() == TaskStatus.IN_PROGRESS
    call_command("task_status", KEY, "done")
    with pytest.raises(CommandError, match="only moves forward"):
        call_command("task_status", KEY, "in_progress")
    with pytest.raises(CommandError, match="no task"):
        call_command("task_status", "onboarding:7:999:1", "done")
    assert stored_status() == TaskStatus.DONE
