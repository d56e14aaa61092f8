"""Credentials by configuration at the idempotency_key_http kind: an API key in a header, and OAuth2 client
credentials against a token server and an API that takes only current tokens, each in a process of its own
(`oauth2_servers`). Deliveries go through the dispatcher; effects are counted at the API. Both backends."""

import json
import secrets
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from incidents.models import Incident, IncidentKind
from incidents.services.incidents import incidents_sync
from outbox.clock import db_now_plus
from outbox.destinations.credentials.oauth2 import TOKEN_FETCH_SECONDS
from outbox.destinations.lease_rule import lease_refusal
from outbox.destinations.registry import describe_contract, destination_from_config
from outbox.dispatch.dispatcher import dispatch_batch
from outbox.failures import Outgoing
from outbox.hold_lines import destination_holds_now
from outbox.models import (
    Attempt,
    DestinationHealth,
    DestinationHold,
    DestinationState,
    FailureClass,
    Handoff,
    HandoffState,
    HoldKind,
    PauseReason,
)
from outbox.payloads import payload_hash
from tests.factories import ONBOARDING_PAYLOAD, HandoffFactory, onboarding_world, retry_after_rows
from tests.outbox.destinations.oauth2_servers import CLIENT_ID, CLIENT_SECRET, start

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
SECRET_ENV = "HANDOFF_DEST_CRM_OAUTH_SECRET"
KEY_ENV = "HANDOFF_DEST_LEDGER_API_KEY"
API_KEY = "api-key-of-the-ledger"
# How long a run across a token's expiry may take at most (the token lives 5 s).
RUN_DEADLINE_SECONDS = 120.0


@pytest.fixture
def servers(monkeypatch):
    signing_key = secrets.token_hex(16)
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)
    monkeypatch.setenv(KEY_ENV, API_KEY)
    token_server = start("token", signing_key)
    try:
        api = start("api", signing_key, API_KEY)
    except RuntimeError:
        token_server.stop()
        raise
    try:
        yield token_server, api
    finally:
        api.stop()
        token_server.stop()


def oauth2_auth(token_server, **changes) -> dict:
    auth = {
        "scheme": "oauth2_client_credentials",
        "token_url": f"{token_server.url}/token",
        "client_id": CLIENT_ID,
        "client_secret_env": SECRET_ENV,
        "scope": "records:write",
        "audience": "https://api.example",
    }
    return {k: v for k, v in {**auth, **changes}.items() if v is not None}


def config(api, auth: dict, name: str = "crm") -> dict:
    return {
        "kind": "idempotency_key_http",
        "name": name,
        "url": api.url,
        "create": {"path": "/v1/records"},
        "receipt": {"id": "record.id", "key": "record.key", "payload": "record.body"},
        "auth": auth,
        "connect_timeout": 1,
        "read_timeout": 5,
        "retry": {"base_delay": 0, "max_delay": 0},
    }


@pytest.fixture
def built():
    made = []

    def build(api, auth: dict, name: str = "crm"):
        made.append(destination_from_config(config(api, auth, name)))
        return made[-1]

    yield build
    for destination in made:
        destination.close()


def outgoing(key: str) -> Outgoing:
    return Outgoing(
        action_key=key, payload=ONBOARDING_PAYLOAD, payload_hash=payload_hash(ONBOARDING_PAYLOAD)
    )


def sent_keys(api) -> Counter:
    """How many times each key's create was let in at the API."""
    return Counter(r["key"] for r in api.state()["requests"] if r["allowed"])


def test_a_run_across_token_expiry_delivers_everything_fetching_new_tokens_and_nothing_twice(
    servers, built
):
    token_server, api = servers
    # Five seconds (renewed after 4.5): a first token serves several calls even on a loaded machine, where
    # one call took over a second and a token of one second was fetched for every call. The client counts
    # the 5 s from the token's arrival and the API from its issue, so the 0.5 s margin was all that covered
    # the token's fetch and the last call's way to the API: a loaded machine overran it, the API refused,
    # and the renewal came as a repeat. The API's leeway keeps that apart from the renewal asserted here
    # (made by the client itself, before any refusal), which a client that waited for a 401 still fails.
    token_server.faults(expires_in=5)
    api.faults(leeway=60)
    destination = built(api, oauth2_auth(token_server))
    handoffs, deadline = [], time.monotonic() + RUN_DEADLINE_SECONDS
    # Handoffs keep coming until the first token has expired and a second one carried deliveries.
    while token_server.state()["issued"] < 2 or len(handoffs) < 3:
        assert time.monotonic() < deadline, "no second token within the deadline"
        handoffs.append(HandoffFactory(destination="crm"))
        dispatch_batch(destination=destination)

    assert {h.state for h in Handoff.objects.filter(pk__in=[h.pk for h in handoffs])} == {
        S.DELIVERED
    }
    assert set(Attempt.objects.values_list("outcome", flat=True)) == {"created"}, "nothing failed"
    assert sent_keys(api) == Counter({h.action_key: 1 for h in handoffs}), "each key sent once"
    assert len(api.state()["records"]) == len(handoffs)
    # Renewed before it expired: the API never refused a token, and one token served many calls.
    assert all(r["allowed"] for r in api.state()["requests"])
    assert token_server.state()["issued"] == 2 < len(handoffs)
    assert Handoff.objects.filter(state=S.NEEDS_ATTENTION).count() == 0, "nothing to a person"


def test_a_token_the_api_stops_taking_is_renewed_and_the_call_repeated_once_with_its_key(
    servers, built
):
    token_server, api = servers
    destination = built(api, oauth2_auth(token_server))
    assert destination.deliver(outgoing("a:1")).delivered
    api.faults(token_floor=2)  # the API no longer takes token 1 (revoked before its expires_in)
    result = destination.deliver(outgoing("a:2"))

    assert result.delivered and result.created
    assert [(r["key"], r["allowed"]) for r in api.state()["requests"]] == [
        ("a:1", True),
        ("a:2", False),
        ("a:2", True),
    ]
    assert sorted(api.state()["records"]) == ["a:1", "a:2"]
    assert token_server.state()["issued"] == 2
    assert destination.deliver(outgoing("a:3")).delivered
    assert token_server.state()["issued"] == 2, "the new token is kept"


def test_workers_of_one_process_share_one_token_fetched_once(servers, built):
    token_server, api = servers
    destination = built(api, oauth2_auth(token_server))
    with ThreadPoolExecutor(max_workers=8) as workers:
        results = list(workers.map(destination.deliver, [outgoing(f"w:{n}") for n in range(24)]))

    assert [r.detail for r in results if not r.delivered] == []
    assert token_server.state()["issued"] == 1, "one fetch while the other workers waited for it"
    assert sent_keys(api) == Counter({f"w:{n}": 1 for n in range(24)})


def test_a_token_refused_again_after_its_renewal_is_a_credential_failure(servers, built):
    token_server, api = servers
    destination = built(api, oauth2_auth(token_server))
    api.faults(token_floor=10**6)  # the API takes no token of this server
    result = destination.deliver(outgoing("a:1"))

    assert (result.failure_class, result.reason_code) == (
        FailureClass.CREDENTIAL,
        "credential_rejected",
    )
    assert [r["key"] for r in api.state()["requests"]] == ["a:1", "a:1"], "repeated once only"
    assert token_server.state()["issued"] == 2


def test_a_revoked_client_pauses_its_destination_alone_with_one_incident(servers, built):
    token_server, api = servers
    crm = built(api, oauth2_auth(token_server), name="crm")
    ledger = built(api, {"scheme": "api_key", "header": "X-Api-Key", "key_env": KEY_ENV}, "ledger")
    token_server.faults(revoked=True)
    refused = HandoffFactory(destination="crm")
    HandoffFactory(destination="crm")
    stats = dispatch_batch(destination=crm)

    waiting = Handoff.objects.get(pk=refused.pk)
    assert waiting.state == S.PENDING
    assert (waiting.failure_class, waiting.reason_code) == ("credential", "token_refused")
    assert "invalid_client" in waiting.last_error and CLIENT_SECRET not in waiting.last_error
    health = DestinationHealth.objects.get(name="crm")
    assert (health.state, health.pause_reason) == (DestinationState.PAUSED, PauseReason.CREDENTIAL)
    assert stats.paused and dispatch_batch(destination=crm).paused
    assert len(token_server.state()["requests"]) == 1, "the paused destination asks nothing more"
    # The other destination, on the same API, keeps delivering.
    delivered = [HandoffFactory(destination="ledger") for _ in range(3)]
    dispatch_batch(destination=ledger)
    assert {Handoff.objects.get(pk=h.pk).state for h in delivered} == {S.DELIVERED}
    assert sent_keys(api) == Counter({h.action_key: 1 for h in delivered})
    assert not DestinationHealth.objects.filter(name="ledger", state=DestinationState.PAUSED)
    incidents_sync()
    incidents_sync()
    [incident] = Incident.objects.filter(kind=IncidentKind.DESTINATION)
    assert incident.cause == "destination:crm:credential"


def test_an_unreachable_token_endpoint_is_transient_and_reaches_nothing(
    servers, built, refused_port
):
    _token_server, api = servers
    gone = f"http://127.0.0.1:{refused_port}/token"
    destination = built(api, oauth2_auth(_token_server, token_url=gone))
    result = destination.deliver(outgoing("a:1"))

    assert (result.failure_class, result.reason_code) == (
        FailureClass.TRANSIENT,
        "token_endpoint_connect_failed",
    )
    assert "token endpoint" in result.detail
    assert api.state()["requests"] == []


@pytest.mark.parametrize("status", [503, 500])
def test_a_token_endpoint_down_pauses_its_destination_naming_the_token_endpoint_not_the_api(
    servers, built, settings, status
):
    settings.HANDOFF_BREAKER_THRESHOLD = 3
    token_server, api = servers
    crm = built(api, oauth2_auth(token_server))
    token_server.faults(down=status)
    handoffs = [HandoffFactory(destination="crm") for _ in range(3)]
    for _ in handoffs:
        dispatch_batch(destination=crm)
        Handoff.objects.filter(destination="crm").update(next_attempt_at=db_now_plus(-1))

    waiting = Handoff.objects.get(pk=handoffs[0].pk)
    assert (waiting.state, waiting.failure_class) == (S.PENDING, FailureClass.TRANSIENT)
    assert waiting.reason_code == f"token_endpoint_http_{status}"
    assert waiting.attempts_in_run == 0, "the destination's outage spends no handoff's attempt"
    health = DestinationHealth.objects.get(name="crm")
    # The old column, written for the previous release's dispatchers only, keeps a reason they know.
    assert (health.state, health.pause_reason) == (DestinationState.PAUSED, PauseReason.UNREACHABLE)
    # The pause's reason is its hold's, carried as a field (not read from its words), as the lists read it.
    assert health.breaker_pause_reason == PauseReason.TOKEN_ENDPOINT
    listed = DestinationHealth.objects.paused_by_breaker().get(name="crm")
    assert listed.breaker_pause_words == "token endpoint unavailable (the API was not called)"
    # Its hold, which every screen and `destinations holds` list, and its incident name the token endpoint.
    [hold] = DestinationHold.objects.filter(destination="crm", ended_at__isnull=True)
    assert (hold.kind, hold.pause_reason) == (HoldKind.BREAKER, PauseReason.TOKEN_ENDPOINT)
    assert hold.reason.startswith(
        "token endpoint unavailable (the API was not called): 3 consecutive"
    )
    assert f"token_endpoint_http_{status}" in hold.reason
    # `manage.py destinations holds` and the pages' hold lists print these lines.
    [line] = destination_holds_now("crm").live
    assert "token endpoint unavailable (the API was not called)" in line.words
    client = Client()
    client.force_login(onboarding_world()["olga"])
    page = client.get("/health/").content.decode()
    assert "Destination crm is paused since" in page
    assert "(token endpoint unavailable (the API was not called))" in page
    assert "unreachable (connection failures" not in page
    incidents_sync()
    [incident] = Incident.objects.filter(kind=IncidentKind.DESTINATION)
    assert incident.title == (
        "Destination crm paused: token endpoint unavailable (the API was not called)"
    )
    assert (incident.cause, incident.failure_class) == (
        "destination:crm:token_endpoint",
        PauseReason.TOKEN_ENDPOINT,
    )
    assert api.state()["requests"] == []


@pytest.mark.parametrize("asked, held", [(300, 300), (86_400, 600)], ids=["asked", "capped"])
def test_a_token_endpoints_retry_after_holds_the_destination_as_the_apis_own(
    servers, built, settings, asked, held
):
    settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS = 600
    token_server, api = servers
    crm = built(api, oauth2_auth(token_server))
    token_server.faults(rate_limited=asked)
    first, second = HandoffFactory(destination="crm"), HandoffFactory(destination="crm")
    dispatch_batch(destination=crm)

    waiting = Handoff.objects.get(pk=first.pk)
    assert (waiting.state, waiting.reason_code) == (S.PENDING, "token_endpoint_http_429")
    assert f"Retry-After {asked} s" in waiting.last_error
    # The whole destination is held, on the database clock, as long as asked (capped as the API's own).
    [hold] = retry_after_rows("crm")
    assert "token endpoint" in hold.reason
    # A minute's leeway for a loaded machine's stalls between the answer and this check.
    assert retry_after_rows("crm").filter(
        ends_at__gt=db_now_plus(held - 60), ends_at__lte=db_now_plus(held)
    )
    # Nothing more is asked of the token endpoint, nor anything of the API, while it holds.
    Handoff.objects.filter(pk__in=[first.pk, second.pk]).update(next_attempt_at=db_now_plus(-1))
    assert dispatch_batch(destination=crm).claimed == 0
    assert len(token_server.state()["requests"]) == 1
    assert Handoff.objects.get(pk=second.pk).attempts_in_run == 0
    assert api.state()["requests"] == []


def test_after_a_token_endpoints_retry_after_nothing_in_the_process_asks_it_again_before_the_end(
    servers, built
):
    token_server, api = servers
    crm = built(api, oauth2_auth(token_server))
    token_server.faults(rate_limited=300)
    first = crm.deliver(outgoing("a:1"))
    # A lookup, a probe or a worker whose permit predates the hold: the same wait, nothing asked.
    again = crm.deliver(outgoing("a:2"))

    assert (first.reason_code, first.retry_after) == ("token_endpoint_http_429", 300)
    assert again.reason_code == "token_endpoint_http_429" and 240 < again.retry_after <= 300
    assert "Retry-After 300 s" in again.detail and "s left" in again.detail
    assert len(token_server.state()["requests"]) == 1
    assert api.state()["requests"] == []
    # Its end passed: the next call asks again, and delivers once the endpoint issues a token.
    token_server.faults(rate_limited=None)
    crm.config.credentials.oauth2._asked_to_wait = None
    assert crm.deliver(outgoing("a:3")).delivered
    assert len(token_server.state()["requests"]) == 2


def test_client_secret_basic_scope_and_audience_reach_the_token_endpoint(servers, built):
    token_server, api = servers
    destination = built(api, oauth2_auth(token_server, auth_method="client_secret_basic"))
    assert destination.deliver(outgoing("a:1")).delivered
    assert token_server.state()["requests"] == [
        {
            "method": "client_secret_basic",
            "client_id": CLIENT_ID,
            "scope": "records:write",
            "audience": "https://api.example",
        }
    ]


def test_an_api_key_reaches_the_api_in_its_header_and_a_wrong_one_is_a_credential_failure(
    servers, built, monkeypatch
):
    _token_server, api = servers
    destination = built(api, {"scheme": "api_key", "header": "X-Api-Key", "key_env": KEY_ENV})
    assert destination.deliver(outgoing("a:1")).delivered
    monkeypatch.setenv(KEY_ENV, "not-the-key")
    refused = destination.deliver(outgoing("a:2"))

    assert (refused.failure_class, refused.reason_code, refused.status_code) == (
        FailureClass.CREDENTIAL,
        "credential_rejected",
        401,
    )
    assert [(r["key"], r["allowed"]) for r in api.state()["requests"]] == [
        ("a:1", True),
        ("a:2", False),
    ], "a static key is not sent again after a 401"
    assert sorted(api.state()["records"]) == ["a:1"]


def test_the_contract_names_the_scheme_and_places_never_the_secrets(servers, built, monkeypatch):
    token_server, api = servers
    destination = built(api, oauth2_auth(token_server))
    words = describe_contract(destination)
    assert "OAuth2 client credentials" in words and f"{token_server.url}/token" in words
    assert SECRET_ENV in words and CLIENT_SECRET not in words
    keyed = built(api, {"scheme": "api_key", "header": "X-Api-Key", "key_env": KEY_ENV}, "ledger")
    assert "API key in header X-Api-Key" in describe_contract(keyed)
    assert API_KEY not in describe_contract(keyed)
    monkeypatch.delenv(SECRET_ENV)
    assert destination.credentials_missing() == [
        f"OAuth2 client secret: environment variable {SECRET_ENV} is not set or empty"
    ]


def test_destinations_list_names_the_scheme_and_whether_each_secret_is_there(tmp_path, monkeypatch):
    client_id_env = "HANDOFF_DEST_CRM_CLIENT_ID"
    auth = oauth2_auth(_Url(), client_id=None, client_id_env=client_id_env)
    auth["token_url"] = "https://auth.example/token"
    file = tmp_path / "destinations.json"
    file.write_text(json.dumps({"destinations": [config(_Url(), auth)]}))
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)
    monkeypatch.setenv(client_id_env, "crm-client-id-value")
    call_command("destinations", "apply", str(file), stdout=StringIO())
    monkeypatch.delenv(client_id_env)
    out = StringIO()
    call_command("destinations", "list", stdout=out)
    listed = out.getvalue()

    assert f"${client_id_env} MISSING" in listed and f"${SECRET_ENV} present" in listed
    assert "OAuth2 client credentials" in listed and "https://auth.example/token" in listed
    assert CLIENT_SECRET not in listed and "crm-client-id-value" not in listed


@pytest.mark.parametrize(
    ("auth", "refusal"),
    [
        ({"token_url": "http://auth.example/token"}, "auth.token_url must be https://"),
        ({"token_url": "/token"}, "auth.token_url must be an absolute https:// URL"),
        ({"token_url": "https://u:p@auth.example/t"}, "auth.token_url: no user, password"),
        ({"auth_method": "private_key_jwt"}, "auth.auth_method must be one of"),
        ({"client_secret_env": "DJANGO_SECRET_KEY"}, "not a destination's variable"),
        ({"client_secret_env": None}, "name exactly one of client_secret_env"),
        ({"scope": "a\nb"}, "auth.scope must be a text on one line"),
        ({"grant_type": "password"}, "auth: unknown key(s) grant_type"),
    ],
)
def test_a_wrong_oauth2_configuration_is_refused_naming_the_field(auth, refusal):
    token_url = {"token_url": "https://auth.example/token"}
    with pytest.raises(ValueError, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        destination_from_config(config(_Url(), oauth2_auth(_Url(), **{**token_url, **auth})))


@pytest.mark.parametrize(
    ("auth", "refusal"),
    [
        ({"header": "Host"}, "auth.header: routes or frames the request"),
        ({"header": "X Key"}, "auth.header: not an HTTP token"),
        ({"header": "Authorization"}, "auth.header: an API key goes in a header of its own"),
        ({"key_file": "/etc/passwd"}, "outside the secrets directory"),
        ({"key_env": None}, "name exactly one of key_env, key_file"),
    ],
)
def test_a_wrong_api_key_configuration_is_refused_naming_the_field(auth, refusal):
    given = {"scheme": "api_key", "header": "X-Api-Key", "key_env": KEY_ENV, **auth}
    given = {k: v for k, v in given.items() if v is not None}
    with pytest.raises(ValueError, match=refusal):
        destination_from_config(config(_Url(), given))


class _Url:
    url = "https://api.example"


def test_a_token_fetch_counts_in_a_calls_time_against_the_lease(settings):
    # A call that first fetches a token may take the fetch's timeouts too: a lease that only outlasts the
    # API call's own timeouts would pass the claim to another worker mid-call.
    settings.HANDOFF_LEASE_SECONDS = 10  # `config`'s API call: connect_timeout 1 + read_timeout 5
    static = destination_from_config(config(_Url(), {"scheme": "bearer", "token_env": KEY_ENV}))
    oauth2 = destination_from_config(config(_Url(), oauth2_auth(_Url())))
    assert static.call_seconds == 6 and lease_refusal(static) is None
    assert oauth2.call_seconds == 6 + TOKEN_FETCH_SECONDS
    refusal = lease_refusal(oauth2)
    assert refusal is not None and refusal.key == "read_timeout"
    assert "auth's token fetch (7 s) + connect_timeout + read_timeout = 13 s" in refusal.detail
