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
