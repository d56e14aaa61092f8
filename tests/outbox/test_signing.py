"""A call's signature covers the timestamp its `webhook-timestamp` header states, whatever zone the time
given to `signed_headers` is in (`outbox/signing.py`)."""

from datetime import UTC, datetime, timedelta, timezone

from httpapi.signatures import verify_signature
from outbox.signing import signed_headers

SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
BODY = '{"action_key":"onboarding:7:1:1","payload":{"plan":"standard"}}'


def test_a_time_in_another_zone_is_signed_as_the_header_states_it():
    """The library's `sign` read any datetime's clock as UTC: a time given in UTC+2 was signed for two hours
    before the moment the header stated, and the receiver refused the call."""
    now = datetime.now(tz=UTC).astimezone(timezone(timedelta(hours=2)))
    headers = signed_headers(BODY, secret=SECRET, now=now)

    assert headers["webhook-timestamp"] == str(int(now.timestamp()))
    # Raises SignatureInvalid when the receiver would refuse the call.
    verify_signature(secrets=[SECRET], body=BODY, headers=headers)
