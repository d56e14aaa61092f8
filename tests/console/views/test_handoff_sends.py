"""The handoff's page shows what it sends (issue 35): the request frozen at approval, in its destination's
words (the call, the body redacted as payloads are, the route's headers, the names only of the headers the
destination sets), so an operator sees what the destination receives, not only the approved payload."""

import html

import pytest

from approvals.route_requests import route_requests, route_requests_hash
from approvals.rules import rules_for
from approvals.services import request_approve
from outbox.models import Handoff
from tests.approvals.request_mapping_world import (
    ACCOUNT,
    CONTACT,
    WELCOME,
    apply,
    crm_row,
    mail_row,
    mapping_world,
    step,
    workflows,
)
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def world(monkeypatch):
    return mapping_world(monkeypatch)


def approved(world) -> Handoff:
    request = world["request"]
    return request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
        requests_hash=route_requests_hash(
            route_requests(request.payload, rules_for("onboarding").steps)
        ),
    )


def sends_section(world, handoff: Handoff) -> str:
    page = html.unescape(client_for(world["olga"]).get(f"/handoffs/{handoff.pk}/").content.decode())
    start = page.index('<section id="what-it-sends">')
    return page[start : page.index("</section>", start)]


def test_a_mapped_handoff_shows_the_frozen_request_it_sends(world):
    crm_row()
    contact = {**CONTACT, "headers": {"X-Plan": {"$": "plan"}}}
    apply(world, workflows(step("create_contact", contact), step("create_account", ACCOUNT)))
    handoff = approved(world)
    # Published later: the handoff's page still shows what was approved.
    apply(world, workflows(step("create_contact", ACCOUNT), step("create_account", ACCOUNT)))

    section = sends_section(world, handoff)

    assert "frozen in this handoff" in section
    assert "<code>POST /services/data/sobjects/Contact/?source=handoff</code>" in section
    assert '"company": "Northwind Traders"' in section
    assert '"slug": "standard-Northwind Traders"' in section
    assert '"email": "[redacted]"' in section
    assert "onboarding@northwind.example" not in section
    assert '"X-Plan": "standard"' in section
    # The destination's own headers by name, never their values.
    assert (
        "<code>Authorization</code>, <code>Content-Type</code>, <code>Idempotency-Key</code>"
        in (section)
    )
    assert "crm-token" not in section


def test_a_mapped_email_handoff_shows_the_frozen_message(world):
    mail_row()
    apply(world, workflows(step("send_welcome_pack", WELCOME, destination="welcome-mail")))
    handoff = approved(world)

    section = sends_section(world, handoff)

    assert "<code>e-mail from welcome@handoff.example</code>" in section
    assert "<dt>Subject</dt><dd>Welcome aboard, Northwind Traders</dd>" in section
    assert "Hello Northwind Traders,\n\nyour standard plan starts today." in section
    assert "<dt>To</dt><dd><code>[redacted]</code></dd>" in section


def test_an_unmapped_handoff_says_it_sends_the_payload_as_it_is(world):
    crm_row()
    apply(world, workflows(step("create_account", None)))
    handoff = approved(world)

    section = sends_section(world, handoff)

    assert "Its step maps no request" in section
    assert "<code>POST /services/data/sobjects/{object}/</code>" in section
    assert '"client_name": "Northwind Traders"' in section
