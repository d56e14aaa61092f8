"""Hostile input at the two signed APIs (the receiver and the intake of triggers), as a table.

Every input gets a 4xx with a reason, never a 5xx, and a count of the rows of every table of both
databases, before and after, shows nothing written beyond the record the contract keeps: the
receiver's replay record of a verified message id, and the intake's record of a trigger it rejects
with reasons (`rejected_at_intake`, 422). Runs on SQLite and on PostgreSQL.
"""

import base64
import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.conf import settings
from django.db import connections
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook

from httpapi.strict_json import nesting_depth
from tests.factories import ONBOARDING_PAYLOAD, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

RECEIVER = "/delivery/api/tasks"
BATCH = "/delivery/api/tasks/batch"
INTAKE = "/approvals/api/triggers"
KEY = "onboarding:7:42:1"
OTHER_SECRET = "whsec_" + base64.b64encode(b"not-the-secret-anyone-configured").decode()
REPLAY_RECORD = "delivery_seenmessage"
TRIGGER_RECORD = "approvals_triggerrecord"


def deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@dataclass(frozen=True)
class Case:
    name: str
    url: str
    body: str | bytes = ""
    status: int = 400
    method: str = "POST"
    # How the request departs from a well-formed signed JSON call.
    secret: str | None = None
    signed_at: timedelta | None = None
    headers: dict = field(default_factory=dict)
    content_type: str = "application/json"
    without_length: bool = False
    unsigned: bool = False
    replay: bool = False
    setting: tuple[str, int] | None = None
    # The one table the contract lets this call add a row to.
    may_write: str | None = None

    @property
    def api(self) -> str:
        return "intake" if self.url == INTAKE else "receiver"

    def secret_to_sign_with(self) -> str:
        if self.secret is not None:
            return self.secret
        return (
            settings.INTAKE_SIGNING_SECRET
            if self.api == "intake"
            else settings.RECEIVER_SIGNING_SECRET
        )


def task(payload_json: str = '{"client_name": "Northwind"}', key: str = KEY) -> str:
    return f'{{"action_key": {json.dumps(key)}, "payload": {payload_json}}}'


def trigger(**fields) -> str:
    document = {
        "workflow": "onboarding",
        "workspace_id": 7,
        "reference": "crm-1",
        "revision": 1,
        "payload": ONBOARDING_PAYLOAD,
        **fields,
    }
    return json.dumps(document)


def raw_trigger(name: str, value: str) -> str:
    """A trigger whose field `name` is the JSON text `value` (what json.dumps would not write)."""
    return trigger(**{name: "@@"}).replace('"@@"', value)


NAN_PAYLOAD = '{"client_name": "Northwind", "score": NaN}'
TOO_LONG_ID = "evt_" + "x" * 300
# Offsets from the moment of signing, never instants fixed at import: a long run must not age them.
STALE = timedelta(minutes=-10)
FUTURE = timedelta(minutes=10)
ITEMS_OVER_LIMIT = json.dumps(
    {"items": [{"action_key": f"k:{n}", "payload": {"client_name": "n"}} for n in range(101)]}
)

RECEIVER_CASES = [
    Case("nan", RECEIVER, task(NAN_PAYLOAD), may_write=REPLAY_RECORD),
    Case(
        "infinity", RECEIVER, task('{"client_name": "N", "n": Infinity}'), may_write=REPLAY_RECORD
    ),
    Case(
        "minus-infinity",
        RECEIVER,
        task('{"client_name": "N", "n": -Infinity}'),
        may_write=REPLAY_RECORD,
    ),
    Case("1e999", RECEIVER, task('{"client_name": "N", "n": 1e999}'), may_write=REPLAY_RECORD),
    Case("lone-surrogate", RECEIVER, task('{"client_name": "\\ud800"}'), may_write=REPLAY_RECORD),
    Case(
        "lone-surrogate-key",
        RECEIVER,
        task('{"client_name": "N", "\\udfff": 1}'),
        may_write=REPLAY_RECORD,
    ),
    Case("nul-in-string", RECEIVER, task('{"client_name": "a\\u0000b"}'), may_write=REPLAY_RECORD),
    Case("nul-in-key", RECEIVER, task(key="onboarding:7:\x00:1"), may_write=REPLAY_RECORD),
    Case(
        "huge-integer-text",
        RECEIVER,
        task('{"client_name": "N", "n": ' + "9" * 5000 + "}"),
        may_write=REPLAY_RECORD,
    ),
    Case("nesting-10000", RECEIVER, task(deep(10_000)), status=422, may_write=REPLAY_RECORD),
    Case("nesting-33", RECEIVER, task(deep(33)), status=422, may_write=REPLAY_RECORD),
    Case("not-an-object", RECEIVER, "[1, 2]", may_write=REPLAY_RECORD),
    Case(
        "duplicate-key-in-payload",
        RECEIVER,
        task('{"client_name": "A", "client_name": "B"}'),
        may_write=REPLAY_RECORD,
    ),
    Case("malformed", RECEIVER, "{not json", may_write=REPLAY_RECORD),
    Case("empty-body", RECEIVER, "", may_write=REPLAY_RECORD),
    Case(
        "idempotency-key-mismatch",
        RECEIVER,
        task(),
        headers={"Idempotency-Key": "other"},
        may_write=REPLAY_RECORD,
    ),
    Case("payload-invalid", RECEIVER, task('{"plan": "x"}'), status=422, may_write=REPLAY_RECORD),
    Case("non-utf8", RECEIVER, b'{"action_key": "\xff\xfe", "payload": {}}'),
    Case("chunked-without-length", RECEIVER, task(), without_length=True),
    Case("bad-content-length", RECEIVER, task(), headers={"CONTENT_LENGTH": "ten"}),
    Case("negative-content-length", RECEIVER, task(), headers={"CONTENT_LENGTH": "-1"}),
    Case("text-plain", RECEIVER, task(), status=415, content_type="text/plain"),
    Case(
        "form-encoded",
        RECEIVER,
        "action_key=x",
        status=415,
        content_type="application/x-www-form-urlencoded",
    ),
    Case(
        "latin1-charset",
        RECEIVER,
        task(),
        status=415,
        content_type="application/json; charset=latin-1",
    ),
    Case("oversized", RECEIVER, task('{"client_name": "' + "x" * 300_000 + '"}'), status=413),
    Case(
        "oversized-declared", RECEIVER, task(), status=413, headers={"CONTENT_LENGTH": str(10**12)}
    ),
    Case("forged", RECEIVER, task(), status=401, secret=OTHER_SECRET),
    Case("stale", RECEIVER, task(), status=401, signed_at=STALE),
    Case("from-the-future", RECEIVER, task(), status=401, signed_at=FUTURE),
    Case("replayed", RECEIVER, task(), status=401, replay=True),
    Case("unsigned", RECEIVER, task(), status=401, unsigned=True),
    Case("garbled-signature", RECEIVER, task(), status=401, headers={"webhook-signature": "v1"}),
    Case("garbled-timestamp", RECEIVER, task(), status=401, headers={"webhook-timestamp": "soon"}),
    Case("batch-not-a-list", BATCH, '{"items": {"a": 1}}', may_write=REPLAY_RECORD),
    Case("batch-too-many", BATCH, ITEMS_OVER_LIMIT, status=413, may_write=REPLAY_RECORD),
    Case(
        "batch-nesting-10000",
        BATCH,
        '{"items": [' + deep(10_000) + "]}",
        status=422,
        may_write=REPLAY_RECORD,
    ),
    Case("batch-nan", BATCH, '{"items": [' + task(NAN_PAYLOAD) + "]}", may_write=REPLAY_RECORD),
    Case("batch-forged", BATCH, '{"items": []}', status=401, secret=OTHER_SECRET),
    Case("list-after-nul", RECEIVER + "?after=%00", method="GET", may_write=REPLAY_RECORD),
    Case(
        "list-limit-not-a-number",
        RECEIVER + "?limit=" + "9" * 5000,
        method="GET",
        may_write=REPLAY_RECORD,
    ),
    Case(
        "detail-nul-key",
        RECEIVER + "/onboarding%00key",
        status=404,
        method="GET",
        may_write=REPLAY_RECORD,
    ),
    Case("list-forged", RECEIVER, status=401, method="GET", secret=OTHER_SECRET),
]

INTAKE_CASES = [
    Case(
        "workspace-2^63", INTAKE, trigger(workspace_id=2**63), status=422, may_write=TRIGGER_RECORD
    ),
    Case(
        "workspace-as-text", INTAKE, trigger(workspace_id="7"), status=422, may_write=TRIGGER_RECORD
    ),
    Case("revision-zero", INTAKE, trigger(revision=0), status=422, may_write=TRIGGER_RECORD),
    Case("revision-1e999", INTAKE, raw_trigger("revision", "1e999")),
    Case("revision-nan", INTAKE, raw_trigger("revision", "NaN")),
    Case("workspace-infinity", INTAKE, raw_trigger("workspace_id", "Infinity")),
    Case("lone-surrogate", INTAKE, raw_trigger("reference", '"\\ud800"')),
    Case("nul-in-reference", INTAKE, raw_trigger("reference", '"crm\\u0000"')),
    # Which workspace? Python's json keeps the last value, other parsers the first.
    Case("duplicate-workspace", INTAKE, trigger()[:-1] + ', "workspace_id": 8}'),
    Case(
        "field-nested-600",
        INTAKE,
        raw_trigger("payload", '{"client_name": "N", "x": ' + deep(600) + "}"),
        status=422,
    ),
    Case("nesting-10000", INTAKE, deep(10_000), status=422),
    Case(
        "payload-over-size-limit",
        INTAKE,
        trigger(payload={**ONBOARDING_PAYLOAD, "notes": "x" * 2000}),
        status=422,
        setting=("INTAKE_MAX_PAYLOAD_BYTES", 1000),
        may_write=TRIGGER_RECORD,
    ),
    Case("not-an-object", INTAKE, "[1]"),
    Case("malformed", INTAKE, "{not json"),
    Case("non-utf8", INTAKE, b'{"reference": "\xc3\x28"}'),
    Case("chunked-without-length", INTAKE, trigger(), without_length=True),
    Case("text-plain", INTAKE, trigger(), status=415, content_type="text/plain"),
    Case("oversized", INTAKE, trigger(payload={"notes": "x" * 300_000}), status=413),
    Case("forged", INTAKE, trigger(), status=401, secret=OTHER_SECRET),
    Case("stale", INTAKE, trigger(), status=401, signed_at=STALE),
    Case("replayed", INTAKE, trigger(), status=401, replay=True),
    Case("unsigned", INTAKE, trigger(), status=401, unsigned=True),
    Case(
        "garbled-signature", INTAKE, trigger(), status=401, headers={"webhook-signature": "v1,%%%"}
    ),
    Case("webhook-id-too-long", INTAKE, trigger(), headers={"webhook-id": TOO_LONG_ID}),
]


def row_counts() -> dict[str, int]:
    counts = {}
    for alias in ("default", "delivery"):
        connection = connections[alias]
        with connection.cursor() as cursor:
            for table in connection.introspection.table_names(cursor):
                cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")  # noqa: S608
                counts[f"{alias}.{table}"] = cursor.fetchone()[0]
    return counts


def signature_headers(case: Case, text: str, now: datetime | None = None) -> dict[str, str]:
    if case.unsigned:
        return {}
    at = (now or datetime.now(tz=UTC)) + (case.signed_at or timedelta(0))
    message_id = case.headers.get("webhook-id", f"msg_{case.api}_{case.name}")
    signature = Webhook(case.secret_to_sign_with()).sign(message_id, at, text)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


def send(client, case: Case, now: datetime | None = None):
    """Send the case, signed at `now` (default: this instant) shifted by the case's `signed_at`."""
    body = case.body.encode("utf-8", "surrogatepass") if isinstance(case.body, str) else case.body
    text = body.decode("utf-8", "replace")
    headers = {
        **signature_headers(case, text, now),
        **{k: v for k, v in case.headers.items() if not k.isupper()},
    }
    if case.url == RECEIVER and case.method == "POST":
        headers.setdefault("Idempotency-Key", KEY)
    extra = {k: v for k, v in case.headers.items() if k.isupper()}
    if case.without_length:
        extra.update(CONTENT_LENGTH="", HTTP_TRANSFER_ENCODING="chunked")
    return client.generic(
        case.method, case.url, data=body, content_type=case.content_type, headers=headers, **extra
    )


def reason_of(body: dict) -> object:
    return body.get("detail") or body.get("reasons")


# The per-client call limit (ASVS 2.4.1, outbox/services/call_limits.py) counts every call, a refused one
# too (or hostile input would go uncounted): its slots are the limiter's record, not the input's.
CALL_COUNTER = "default.outbox_destinationslot"


@pytest.fixture
def world():
    return onboarding_world()


@pytest.mark.parametrize("case", RECEIVER_CASES + INTAKE_CASES, ids=lambda c: f"{c.api}-{c.name}")
def test_bad_input_gets_a_4xx_with_a_reason_and_writes_nothing_beyond_the_contract(
    case, world, client, settings
):
    if case.setting:
        setattr(settings, *case.setting)
    now = datetime.now(tz=UTC)
    if case.replay:
        # The very same message twice: one id, one signed timestamp, one signature. Both are signed
        # at the one instant `now`: signing each at its own now() sent two different messages
        # whenever the two straddled a second boundary, and the "replay" was a fair duplicate.
        case = replace(case, signed_at=timedelta(0))
        first = send(client, replace(case, replay=False), now)
        assert first.status_code in (201, 202), first.content
    before = row_counts()
    response = send(client, case, now)
    after = row_counts()
    assert response.status_code == case.status, response.content[:300]
    body = response.json()
    assert body.get("error") or body.get("outcome") == "rejected_at_intake", body
    assert reason_of(body), body
    grown = {
        table: after[table] - count
        for table, count in before.items()
        if after[table] != count and table != CALL_COUNTER
    }
    allowed = (
        {f"{alias}.{case.may_write}": 1 for alias in ("default", "delivery")}
        if case.may_write
        else {}
    )
    if response.status_code == 401:
        # A refused signature is a security event (counted, paged above a rate): the one row it writes.
        allowed["default.reconciliation_securityevent"] = 1
    assert all(allowed.get(table) == delta for table, delta in grown.items()), grown


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_chunked_body_over_real_http_is_400_not_a_credential_failure(live_server):
    def chunks():
        yield task().encode()

    response = httpx.post(
        f"{live_server.url}{RECEIVER}",
        content=chunks(),
        headers={
            **signature_headers(Case("c", RECEIVER), task()),
            "Content-Type": "application/json",
        },
        timeout=10,
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "length_required"


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab"\\[]{}:,')),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet=st.sampled_from('k"\\[]{}')), children, max_size=3)
    ),
    max_leaves=20,
)


def real_depth(value) -> int:
    if isinstance(value, dict | list):
        children = value.values() if isinstance(value, dict) else value
        return 1 + max((real_depth(child) for child in children), default=0)
    return 0


@given(JSON_VALUES)
def test_depth_counted_before_parsing_is_the_real_depth_whatever_the_strings_hold(value):
    # Brackets, quotes and backslashes inside strings must not be counted as nesting.
    assert nesting_depth(json.dumps(value)) == real_depth(value)
