"""A requester reads back the fields they typed (their own e-mail), while secrets and values someone else
typed stay hidden; an approver is told what each hidden field holds and why it is hidden."""

from approvals.services.corrections import handoff_correct
from outbox.redaction import REDACTED, redact
from tests.console.clients import client_for
from tests.factories import ONBOARDING_PAYLOAD, make_request

EMAIL = ONBOARDING_PAYLOAD["contact_email"]


def test_the_requester_reads_back_their_own_email(world):
    body = client_for(world["bob"]).get("/approvals/7/42/1/").content.decode()
    assert f"&quot;contact_email&quot;: &quot;{EMAIL}&quot;" in body
    assert 'id="payload-hidden"' not in body, "nothing is hidden from the person who typed it"


def test_a_secret_the_requester_typed_stays_hidden_from_them(world, settings):
    settings.RECEIVER_SIGNING_SECRET = "whsec_c2VjcmV0LXZhbHVlLWxvbmc="
    payload = {
        **ONBOARDING_PAYLOAD,
        "api_token": "tok-0123456789",
        "notes": "write to ops@northwind.example, key c2VjcmV0LXZhbHVlLWxvbmc=",
    }
    make_request(world["w7"], 43, world["bob"], payload=payload)
    body = client_for(world["bob"]).get("/approvals/7/43/1/").content.decode()
    assert EMAIL in body and "ops@northwind.example" in body
    assert "tok-0123456789" not in body and "c2VjcmV0LXZhbHVlLWxvbmc=" not in body
    assert (
        "<code>api_token</code>: a secret token, a credential: hidden from every screen and log; "
        "the receiver gets it."
    ) in body
    assert "<code>notes</code>: text, its text holds an e-mail address or a secret" in body


def test_an_approver_is_told_what_a_hidden_field_holds_and_why(world):
    body = client_for(world["alice"]).get("/approvals/7/42/1/").content.decode()
    assert EMAIL not in body
    assert "Approving approves these fields too, though they are shown as [redacted]:" in body
    assert (
        "<code>contact_email</code>: an e-mail address, personal data: shown only to the requester "
        "who typed it, hidden from every other screen and log; the receiver gets it."
    ) in body
    assert "Approve exactly this payload" in body


def test_a_value_an_operator_typed_in_a_correction_stays_hidden_from_the_requester(world, rejected):
    handoff_correct(
        handoff_id=rejected.pk,
        actor=world["olga"],
        edits={"client_name": "Northwind Traders", "contact_email": "desk@northwind.example"},
        reason="the receiver needs a client name",
    )
    body = client_for(world["bob"]).get("/approvals/7/50/2/").content.decode()
    assert "desk@northwind.example" not in body, "olga typed it, not bob"
    assert "<code>contact_email</code>: an e-mail address" in body
    # Bob's own plan is his; the revision before, all his, shows his own e-mail.
    assert "&quot;plan&quot;: &quot;standard&quot;" in body
    assert EMAIL in client_for(world["bob"]).get("/approvals/7/50/1/").content.decode()


def test_the_revise_form_starts_with_the_requesters_own_email(world):
    page = client_for(world["bob"]).get("/approvals/7/42/revise/")
    assert page.status_code == 200
    assert f'value="{EMAIL}"' in page.content.decode()
    assert page.context["hidden"] == []


def test_keeping_personal_data_still_masks_every_secret(settings):
    settings.RECEIVER_SIGNING_SECRET = "whsec_c2VjcmV0LXZhbHVlLWxvbmc="
    value = {
        "contact_email": EMAIL,
        "phone": "+49 30 1234567",
        "password": "hunter2-long",
        "notes": f"{EMAIL} Bearer abc.def c2VjcmV0LXZhbHVlLWxvbmc=",
    }
    assert redact(value, keep_personal=True) == {
        "contact_email": EMAIL,
        "phone": "+49 30 1234567",
        "password": REDACTED,
        "notes": f"{EMAIL} Bearer {REDACTED} {REDACTED}",
    }
    assert redact(value)["contact_email"] == REDACTED
