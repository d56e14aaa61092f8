"""The bundled accounts service (delivery/accounts_api.py): the IETF Idempotency-Key draft's answers, through
Django's test client, and nothing written on a refusal."""

import json

import pytest
from django.test import override_settings

from delivery.accounts import account_create_idempotent
from delivery.models import Account, AccountRequestState

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

URL = "/delivery/accounts/v1/accounts"
KEY = "onboarding:7:42:1:provision_account"
BODY = {"client_name": "Northwind Traders", "operation": "provision_account"}


def post(client, body=None, *, key: str | None = KEY, token="accounts-test-token"):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return client.post(
        URL,
        data=json.dumps(BODY if body is None else body),
        content_type="application/json",
        **headers,
    )


def test_a_new_key_creates_one_account_and_the_same_request_replays_it(client):
    first = post(client)
    assert first.status_code == 201
    again = post(client)
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["account"]["id"] == first.json()["account"]["id"]
    assert Account.objects.count() == 1


def test_the_same_key_with_another_body_is_422_and_changes_nothing(client):
    original = post(client).json()["account"]
    refused = post(client, {**BODY, "client_name": "Contoso"})
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    assert Account.objects.get().payload == BODY
    assert Account.objects.get().account_id == original["id"]


def test_the_same_key_while_the_first_is_processing_is_409_in_progress(client):
    account_create_idempotent(key=KEY, payload=BODY)
    Account.objects.update(state=AccountRequestState.PROCESSING)
    in_progress = post(client)
    assert in_progress.status_code == 409
    assert in_progress.json()["error"]["code"] == "request_in_progress"
    assert Account.objects.count() == 1


def test_a_missing_key_is_400_and_writes_nothing(client):
    missing = post(client, key=None)
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "idempotency_key_missing"
    assert not Account.objects.exists()


def test_a_wrong_or_missing_token_is_401_and_writes_nothing(client):
    assert post(client, token="wrong").status_code == 401
    assert client.post(URL, data="{}", content_type="application/json").status_code == 401
    assert not Account.objects.exists()


@override_settings(
    ACCOUNTS_API_TOKEN="new-token", ACCOUNTS_API_TOKEN_PREVIOUS="accounts-test-token"
)
def test_during_a_rotation_the_previous_token_is_still_accepted(client):
    assert post(client).status_code == 201
    assert post(client, key=KEY + ":2", token="new-token").status_code == 201
    assert post(client, key=KEY + ":3", token="older").status_code == 401


def test_the_lookup_answers_the_keys_account_or_an_empty_list(client):
    created = post(client).json()["account"]
    auth = {"HTTP_AUTHORIZATION": "Bearer accounts-test-token"}
    found = client.get(URL, {"idempotency_key": KEY}, **auth).json()["accounts"]
    assert [a["id"] for a in found] == [created["id"]]
    assert client.get(URL, {"idempotency_key": "other"}, **auth).json() == {"accounts": []}
    assert client.get(URL, {"idempotency_key": KEY}).status_code == 401


def test_a_body_that_is_not_a_json_object_is_400_and_writes_nothing(client):
    refused = client.post(
        URL,
        data="[1, 2]",
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer accounts-test-token",
        HTTP_IDEMPOTENCY_KEY=KEY,
    )
    assert refused.status_code == 400
    assert not Account.objects.exists()


def delete(client, account_id: str, *, token="accounts-test-token"):
    return client.delete(f"{URL}/{account_id}", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_an_account_is_closed_by_its_id_and_a_second_close_is_404(client):
    account_id = post(client).json()["account"]["id"]
    closed = delete(client, account_id)
    assert closed.status_code == 200
    assert closed.json()["account"]["id"] == account_id and closed.json()["deleted"] is True
    assert Account.objects.filter(idempotency_key=KEY).count() == 0
    assert delete(client, account_id).status_code == 404, "already gone"
    lookup = client.get(
        URL, {"idempotency_key": KEY}, HTTP_AUTHORIZATION="Bearer accounts-test-token"
    )
    assert lookup.json() == {"accounts": []}


def test_closing_without_the_token_is_401_and_closes_nothing(client):
    account_id = post(client).json()["account"]["id"]
    assert delete(client, account_id, token="wrong").status_code == 401
    assert Account.objects.filter(account_id=account_id).count() == 1
