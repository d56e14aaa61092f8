"""Failure classes, receipts and the retry policy: pure rules, checked exhaustively or by property."""

import random
import re

import pytest
import re2
from hypothesis import given
from hypothesis import strategies as st

from outbox import redaction
from outbox.failures import (
    MalformedReceipt,
    Outgoing,
    classify_status,
    parse_retry_after,
    validate_receipt,
)
from outbox.models import FailureClass
from outbox.payloads import payload_hash
from outbox.redaction import REDACTED, redact, redact_text
from outbox.retry import RetryPolicy

SENT = Outgoing(
    action_key="onboarding:7:42:1",
    payload={"client_name": "N"},
    payload_hash=payload_hash({"client_name": "N"}),
)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, FailureClass.PERMANENT),
        (413, FailureClass.PERMANENT),
        (422, FailureClass.PERMANENT),
        (401, FailureClass.CREDENTIAL),
        (403, FailureClass.CREDENTIAL),
        (409, FailureClass.CONFLICT),
        (429, FailureClass.TRANSIENT),
        (502, FailureClass.TRANSIENT),
        (503, FailureClass.TRANSIENT),
        (504, FailureClass.TRANSIENT),
        (500, FailureClass.UNCERTAIN),
    ],
)
def test_status_classes_follow_the_design_table(status, expected):
    assert classify_status(status)[0] == expected


def test_valid_receipt_gives_task_id_and_created():
    body = {
        "task_id": "t-1",
        "action_key": SENT.action_key,
        "payload_hash": SENT.payload_hash,
        "created": True,
    }
    assert validate_receipt(body, SENT) == ("t-1", True)
    longest = {**body, "task_id": "t" * 120, "status": "s" * 16}
    assert validate_receipt(longest, SENT) == ("t" * 120, True)


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"ok": True},
        {
            "task_id": "",
            "action_key": SENT.action_key,
            "payload_hash": SENT.payload_hash,
            "created": True,
        },
        {
            "task_id": "t-1",
            "action_key": "onboarding:7:42:2",
            "payload_hash": SENT.payload_hash,
            "created": True,
        },
        {
            "task_id": "t-1",
            "action_key": SENT.action_key,
            "payload_hash": "0" * 64,
            "created": True,
        },
        {"task_id": "t-1", "action_key": SENT.action_key, "payload_hash": SENT.payload_hash},
        # More than the outbox row holds: stored cut short, it would not be the receiver's task id or status.
        {
            "task_id": "t" * 121,
            "action_key": SENT.action_key,
            "payload_hash": SENT.payload_hash,
            "created": True,
        },
        {
            "task_id": "t-1",
            "action_key": SENT.action_key,
            "payload_hash": SENT.payload_hash,
            "created": True,
            "status": "s" * 17,
        },
        {
            "task_id": "t-1",
            "action_key": SENT.action_key,
            "payload_hash": SENT.payload_hash,
            "created": True,
            "status": 3,
        },
    ],
)
def test_receipt_that_does_not_prove_the_outcome_is_malformed(body):
    with pytest.raises(MalformedReceipt):
        validate_receipt(body, SENT)


def test_retry_after_in_seconds_and_http_date():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


@given(attempts=st.integers(min_value=1, max_value=60), seed=st.integers())
def test_backoff_is_full_jitter_under_the_cap(attempts, seed):
    policy = RetryPolicy(base_delay=2.0, max_delay=300.0)
    delay = policy.delay(attempts, rng=random.Random(seed))
    assert 0 <= delay <= min(300.0, 2.0 * 2 ** (attempts - 1))


@given(
    attempts=st.integers(min_value=1, max_value=20),
    retry_after=st.floats(min_value=0, max_value=10_000),
)
def test_retry_after_is_honoured_within_its_bound(attempts, retry_after):
    policy = RetryPolicy(max_retry_after=3600.0)
    assert policy.delay(attempts, retry_after) >= min(retry_after, 3600.0)


def test_attempts_are_bounded():
    policy = RetryPolicy(max_attempts=3)
    assert [policy.exhausted(n) for n in (1, 2, 3, 4)] == [False, False, True, True]


def test_redaction_masks_personal_data_and_secrets_everywhere():
    payload = {
        "client_name": "Northwind",
        "contact_email": "a@b.example",
        "nested": [{"api_token": "t"}],
        "notes": "call ops@northwind.example, key whsec_abc123=",
    }
    out = redact(payload)
    assert out["client_name"] == "Northwind"
    assert out["contact_email"] == REDACTED
    assert out["nested"][0]["api_token"] == REDACTED
    assert "northwind.example" not in out["notes"] and "whsec_" not in out["notes"]
    assert redact_text("Authorization: Bearer abc.def") == "Authorization: Bearer " + REDACTED
    assert payload["contact_email"] == "a@b.example", "redaction must not change the original"


def test_redaction_patterns_are_linear_time_re2():
    """With backtracking (`re`) the e-mail pattern took time quadratic in a long run of address characters, and
    redaction runs on receivers' answers and stored payloads before every page and log line: RE2 cannot
    backtrack."""

    patterns = [
        value for value in vars(redaction).values() if isinstance(value, re.Pattern | re2._Regexp)
    ]
    assert patterns, "the redaction module has no patterns to check"
    assert not [p.pattern for p in patterns if isinstance(p, re.Pattern)]


def test_redaction_finds_an_address_after_a_long_run_of_address_characters():
    text = "a." * 50_000 + " reach ops@northwind.example"
    out = redact_text(text)
    assert out.endswith("reach " + REDACTED) and "northwind" not in out
