"""Request mapping for e-mail (issue 35): a step routed to an smtp destination maps the subject, the text and
the recipient; they are checked when published (a `${field}` the schema lacks is refused), rendered at
approval (a line break in the subject or the address is refused: header injection), shown on the approval
page, frozen in the handoff and sent as frozen by a real SMTP server in a process of its own, whatever
mapping is published afterwards."""

import html

import pytest
from django.urls import reverse

from approvals.errors import InvalidPayload
from approvals.models import RuleVersion
from approvals.route_requests import route_requests, route_requests_hash
from approvals.rules import rules_for
from approvals.services import request_approve
from lib.request_mapping import MappingRefused
from outbox.destinations import destination_named
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff, HandoffState
from tests.approvals.request_mapping_world import (
    ACCOUNT,
    WELCOME,
    apply,
    crm_row,
    mail_row,
    mapping_world,
    step,
    workflows,
)
from tests.console.clients import client_for
from tests.outbox.destinations.smtp_server import SmtpServer

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def world(monkeypatch):
    return mapping_world(monkeypatch)


@pytest.fixture
def smtp(tmp_path):
    server = SmtpServer(tmp_path / "smtp")
    yield server
    server.stop()


def welcome(mapping: dict) -> dict:
    return workflows(step("send_welcome_pack", mapping, destination="welcome-mail"))


def approve(world) -> Handoff:
    request = world["request"]
    routes = route_requests(request.payload, rules_for("onboarding").steps)
    return request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
        requests_hash=route_requests_hash(routes),
    )


# --- Checked when published -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mapping", "problem"),
    [
        (
            {**WELCOME, "subject": "Welcome, ${client_nme}"},
            "workflows[0] (onboarding): steps[0].request.subject: ${client_nme} names no field of "
            "the schema (fields: client_name, contact_email, notes, plan)",
        ),
        (
            {**WELCOME, "text": "Your ${tier} plan"},
            "workflows[0] (onboarding): steps[0].request.text: ${tier} names no field of the schema "
            "(fields: client_name, contact_email, notes, plan)",
        ),
        (
            # Optional in the schema: a payload without notes would have no text.
            {**WELCOME, "text": "Notes: ${notes}"},
            "workflows[0] (onboarding): steps[0].request.text: ${notes} is missing",
        ),
        (
            {"subject": "Welcome", "text": "Hello"},
            "workflows[0] (onboarding): steps[0].request: an e-mail mapping needs subject, text and "
            "to (missing to)",
        ),
        (
            {**WELCOME, "subject": "Price: $5"},
            "workflows[0] (onboarding): steps[0].request.subject: not a valid text template ($field "
            "or ${field}; $$ for $)",
        ),
        (
            ACCOUNT,
            "workflows[0] (onboarding): steps[0].request: destination 'welcome-mail' sends e-mail; "
            "its mapping holds subject, text and to",
        ),
    ],
)
def test_an_email_mapping_that_cannot_render_is_refused_naming_the_place(world, mapping, problem):
    mail_row()
    versions = RuleVersion.objects.count()

    with pytest.raises(InvalidPayload) as refused:
        apply(world, welcome(mapping))

    assert refused.value.reasons == [problem]
    assert RuleVersion.objects.count() == versions


def test_an_email_mapping_to_an_http_destination_is_refused(world):
    crm_row()

    with pytest.raises(InvalidPayload) as refused:
        apply(world, workflows(step("create_account", WELCOME)))

    assert refused.value.reasons == [
        "workflows[0] (onboarding): steps[0].request: destination 'crm' sends HTTP requests; "
        "subject, text and to are e-mail's"
    ]


# --- Rendered at approval: header injection refused ----------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "place"),
    [
        ("client_name", "Acme\r\nBcc: everyone@elsewhere.example", "steps[0].request.subject"),
        ("client_name", "Acme\nX-Spam: yes", "steps[0].request.subject"),
        ("contact_email", "a@northwind.example\r\nBcc: b@elsewhere.example", "steps[0].request.to"),
    ],
)
def test_a_line_break_in_a_rendered_header_is_refused_naming_the_part(world, field, value, place):
    mail_row()
    apply(world, welcome(WELCOME))
    payload = {**world["request"].payload, field: value}

    with pytest.raises(MappingRefused) as refused:
        route_requests(payload, rules_for("onboarding").steps)

    assert str(refused.value).startswith(f"{place}: renders with a line break (CR or LF)")


def test_a_line_break_in_the_text_is_kept(world):
    mail_row()
    apply(world, welcome(WELCOME))

    (route,) = route_requests(
        {**world["request"].payload, "plan": "a\nb"}, rules_for("onboarding").steps
    )

    assert route.request["text"].endswith("your a\nb plan starts today.\n")


# --- Shown, frozen, sent as frozen --------------------------------------------------------------------


def test_the_approval_page_shows_the_email_each_step_will_send(world):
    mail_row()
    apply(world, welcome(WELCOME))

    page = html.unescape(
        client_for(world["alice"])
        .get(reverse("approvals:detail", args=[7, 42, 1]))
        .content.decode()
    )

    assert "Step send_welcome_pack → welcome-mail" in page
    assert "Welcome aboard, Northwind Traders" in page
    assert "Hello Northwind Traders,\n\nyour standard plan starts today." in page
    # The recipient is redacted as payloads are.
    assert "<dt>To</dt><dd><code>[redacted]</code></dd>" in page
    assert "onboarding@northwind.example" not in page


def test_the_handoff_sends_its_frozen_email_once_whatever_is_published_later(world, smtp):
    mail_row(smtp.port)
    apply(world, welcome(WELCOME))
    handoff = approve(world)
    frozen = {
        "subject": "Welcome aboard, Northwind Traders",
        "text": "Hello Northwind Traders,\n\nyour standard plan starts today.\n",
        "to": "onboarding@northwind.example",
    }
    assert handoff.request == frozen
    # A new rule version maps the e-mail otherwise: the approved handoff keeps what was approved.
    apply(world, welcome({**WELCOME, "subject": "Changed: ${plan}", "text": "Changed"}))

    assert handoff_deliver(
        handoff_id=handoff.pk, destination=destination_named("welcome-mail")
    ) == (HandoffState.DELIVERED)

    (message,) = smtp.messages()
    assert message["Subject"] == frozen["subject"]
    assert message["To"] == frozen["to"]
    assert message.get_payload(decode=True).decode().replace("\r\n", "\n") == frozen["text"]
    assert message["X-Handoff-Action-Key"] == handoff.action_key


def test_an_unmapped_smtp_step_keeps_the_destination_templates(world, smtp):
    mail_row(smtp.port)
    apply(world, workflows(step("send_welcome_pack", None, destination="welcome-mail")))
    handoff = approve(world)
    assert handoff.request is None

    assert handoff_deliver(handoff_id=handoff.pk) == HandoffState.DELIVERED

    (message,) = smtp.messages()
    assert message["Subject"] == "Destination-level subject, Northwind Traders"
    assert message.get_payload(decode=True).decode() == "Destination-level body.\r\n"
