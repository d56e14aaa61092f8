"""outbox/redaction.py: a configured secret's exact value is masked wherever it appears, even typed into a
payload's free text (the METRICS_TOKEN value in a trigger's notes was shown on the handoff page)."""

import os

from django.conf import settings
from django.test import override_settings

from outbox import redaction
from outbox.redaction import REDACTED, redact, redact_text, secrets_read_once_per_request


def test_the_metrics_token_typed_verbatim_is_masked():
    text = f"call me, the token is {settings.METRICS_TOKEN} ok"
    assert settings.METRICS_TOKEN not in redact_text(text)
    assert redact({"notes": text})["notes"] == f"call me, the token is {REDACTED} ok"


def test_a_destinations_secret_variable_is_masked_and_a_rotated_value_too(monkeypatch):
    monkeypatch.setenv("CRM_API_TOKEN", "crm-token-first-value")
    assert "crm-token-first-value" not in redact_text("x crm-token-first-value y")
    monkeypatch.setenv("CRM_API_TOKEN", "crm-token-after-rotation")
    assert redact_text("crm-token-after-rotation") == REDACTED


def test_a_signing_secrets_key_without_its_prefix_is_masked():
    key = settings.RECEIVER_SIGNING_SECRET.removeprefix("whsec_")
    assert key not in redact_text(f"the key is {key}")


@override_settings(METRICS_TOKEN="short")
def test_values_too_short_to_be_secrets_are_left_alone():
    assert redact_text("a short note") == "a short note"


def test_a_secret_variable_added_as_another_variable_goes_is_masked(monkeypatch):
    """The environment keeps its size (one variable removed, one added): the new one is still read."""
    monkeypatch.setenv("HANDOFF_TEST_PLAIN_SETTING", "x")
    redact_text("warm the cache")
    monkeypatch.delenv("HANDOFF_TEST_PLAIN_SETTING")
    monkeypatch.setenv("BILLING_API_TOKEN", "billing-token-value")
    assert redact_text("x billing-token-value y") == f"x {REDACTED} y"


def test_each_pattern_still_masks_in_any_case_after_its_cheap_precheck():
    """A pattern runs only on a text holding its part ("whsec_", "bearer", "@"): the check is case-blind
    where the pattern is."""
    assert redact_text("auth: BEARER abc.def-ghi") == f"auth: Bearer {REDACTED}"
    assert redact_text("key whsec_QUJDRA== here") == f"key {REDACTED} here"
    assert redact_text("mail Ops@Example.COM now") == f"mail {REDACTED} now"
    assert redact_text("Client 42 · plan standard") == "Client 42 · plan standard"


def test_a_secret_rotated_between_two_requests_is_masked_in_the_second(monkeypatch):
    """Within a request the secrets are read once (`secrets_read_once_per_request`); the next request reads
    the rotated value."""
    seen = []

    def page(request):
        seen.append(redact_text(os.environ["CRM_API_TOKEN"]))
        return None

    monkeypatch.setenv("CRM_API_TOKEN", "crm-token-first-value")
    secrets_read_once_per_request(page)(object())
    monkeypatch.setenv("CRM_API_TOKEN", "crm-token-after-rotation")
    secrets_read_once_per_request(page)(object())

    assert seen == [REDACTED, REDACTED]


def test_a_sensitive_field_is_redacted_again_once_its_name_is_cached_and_new_parts_are_honoured(
    monkeypatch,
):
    """Field names' answers are cached (a JSON log line asks for the same ten at every line): a name seen
    before is still masked, and parts replaced at run time are never answered from the old ones."""
    for _ in range(3):
        assert redact({"Api_Token": "t-1", "note": "plain"}) == {
            "Api_Token": REDACTED,
            "note": "plain",
        }
    assert redact({"customer_email": "x"}, keep_personal=True) == {"customer_email": "x"}
    assert redact({"customer_email": "x"}) == {"customer_email": REDACTED}

    monkeypatch.setattr(redaction, "SENSITIVE_KEY_PARTS", (*redaction.SENSITIVE_KEY_PARTS, "note"))
    assert redact({"Api_Token": "t-1", "note": "plain"}) == {
        "Api_Token": REDACTED,
        "note": REDACTED,
    }
    monkeypatch.undo()
    assert redact({"note": "plain"}) == {"note": "plain"}


def test_a_long_sensitive_field_name_is_redacted_and_not_kept_in_the_cache():
    """The cache keeps short names only: a payload's long keys cannot grow it."""
    before = redaction._names_a_part_cached.cache_info().currsize
    name = "x" * 100 + "_password"
    assert redact({name: "hunter2-long"}) == {name: REDACTED}
    assert redaction._names_a_part_cached.cache_info().currsize == before
