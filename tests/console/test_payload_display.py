"""Payloads on screen: the JSON that is sent, after redaction."""

from tests.console.clients import client_for


def test_handoff_detail_shows_redacted_payload_as_json(world, pending):
    body = client_for(world["olga"]).get(f"/handoffs/{pending.pk}/").content.decode()
    assert "&quot;client_name&quot;: &quot;Northwind Traders&quot;" in body
    assert "&quot;contact_email&quot;: &quot;[redacted]&quot;" in body
    assert "onboarding@northwind.example" not in body


def test_approval_detail_shows_the_payload_as_json(world):
    body = client_for(world["alice"]).get("/approvals/7/42/1/").content.decode()
    assert "&quot;plan&quot;: &quot;standard&quot;" in body
    assert "onboarding@northwind.example" not in body


def test_finding_evidence_reads_as_field_value_lines():
    """A finding's "Source says" / "Receiver says" cells: one line per field, names without underscores,
    times in UTC words, an empty value a dash, a nested value compact JSON; no JSON document."""
    from console.templatetags.payloads import evidence_lines

    lines = evidence_lines(
        {
            "payload_hash": "ab" * 32,
            "created_at": "2026-12-01T16:25:28.123456+00:00",
            "reason_code": "",
            "found": True,
            "extra": {"b": 2, "a": 1},
            "note": "T-shirt 2026-12-01",
        }
    )
    assert lines == [
        ("payload hash", "ab" * 32),
        ("created at", "2026-12-01 16:25:28 UTC"),
        ("reason code", "—"),
        ("found", "yes"),
        ("extra", '{"a": 1, "b": 2}'),
        ("note", "T-shirt 2026-12-01"),
    ]
    assert evidence_lines({}) == [] and evidence_lines(None) == []
    assert evidence_lines("a bare value") == [("value", "a bare value")]


def test_handoff_detail_says_which_fields_are_hidden_and_why(world, pending):
    body = client_for(world["olga"]).get(f"/handoffs/{pending.pk}/").content.decode()
    assert (
        "<code>contact_email</code>: an e-mail address, personal data: shown only to the requester "
        "who typed it, hidden from every other screen and log; the receiver gets it."
    ) in body
    assert "The payload hash covers the real values." in body
    assert "onboarding@northwind.example" not in body


def test_hidden_fields_name_a_credential_and_a_masked_text_without_their_values():
    from console.templatetags.payloads import hidden_fields
    from outbox.redaction import redact

    original = {"api_token": "abc", "notes": "call me at a@b.example", "plan": "standard"}
    assert hidden_fields(original, redact(original)) == [
        {
            "field": "api_token",
            "kind": "a secret token",
            "why": "a credential: hidden from every screen and log; the receiver gets it",
        },
        {
            "field": "notes",
            "kind": "text",
            "why": "its text holds an e-mail address or a secret, masked where it appears; the "
            "receiver gets the whole text",
        },
    ]
    assert hidden_fields("text", "text") == []
