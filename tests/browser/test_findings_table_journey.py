"""A handoff's findings table is read, not decoded: "Source says" and "Receiver says" are field: value lines
(no raw JSON), "Next step" keeps a readable width, and the page fits a 1280 px window and a 390 px phone."""

import pytest
from playwright.sync_api import expect

from approvals.services import request_approve
from delivery.models import ReceiverTask
from delivery.services import payload_hash as receiver_hash
from outbox.dispatch.dispatcher import handoff_deliver
from reconciliation.models import Finding, FindingKind
from reconciliation.services.runs import reconciliation_run
from tests.factories import ONBOARDING_PAYLOAD, onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def _delivered_with_a_payload_mismatch():
    """Request 42 delivered, then its task changed at the receiver: a real reconciliation run records the
    finding with the evidence it collects (a dozen fields on the source side, hashes of 64 characters)."""
    world = onboarding_world()
    handoff = request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    handoff_deliver(handoff_id=handoff.pk)
    other = {**ONBOARDING_PAYLOAD, "plan": "enterprise"}
    ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).update(
        payload=other, payload_hash=receiver_hash(other)
    )
    reconciliation_run()
    finding = Finding.objects.get(action_key=handoff.action_key)
    assert finding.kind == FindingKind.PAYLOAD_MISMATCH
    return handoff, finding


def _page_width(page) -> tuple[int, int]:
    return tuple(page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]"))


@pytest.mark.parametrize("width", [1280, 390])
def test_findings_table_is_readable_and_fits_the_window(
    page, live_server, sign_in, axe_check, width
):
    handoff, finding = _delivered_with_a_payload_mismatch()
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/{handoff.pk}/")
    row = page.locator(f"#handoff-finding-{finding.pk}")
    expect(row).to_be_visible()

    source, receiver = row.locator(".source-says"), row.locator(".receiver-says")
    # Field: value lines, not a JSON document.
    expect(source.locator("dt", has_text="payload hash")).to_have_count(1)
    expect(source).to_contain_text(handoff.payload_hash)
    expect(receiver.locator("dt", has_text="task id")).to_have_count(1)
    expect(receiver).to_contain_text(finding.receiver_evidence["payload_hash"])
    for cell in (source, receiver):
        assert "{" not in cell.inner_text() and '":' not in cell.inner_text()

    # "Next step" is not squeezed to a word per line: at least ~20 characters wide.
    next_step = row.locator(".next-step")
    expect(next_step).to_contain_text("Never overwrite")
    assert next_step.bounding_box()["width"] >= 160, next_step.bounding_box()

    scroll_width, window_width = _page_width(page)
    assert scroll_width <= window_width, (
        f"the handoff page is {scroll_width} px wide in a {window_width} px window"
    )
    axe_check(f"handoff with findings at {width} px")
