"""One journey per person in a real Chromium, each screen checked with axe-core (no serious or critical
violations) and pictured for the README (docs/screenshots/)."""

import re

import pytest
from playwright.sync_api import expect

from approvals.models import Request, RequestState, Role
from approvals.services import request_approve, request_revise
from delivery.services import task_status_set
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import drain, handoff_deliver
from outbox.models import Handoff, HandoffState
from reconciliation.models import FindingKind
from reconciliation.services import reconciliation_run
from tests.factories import (
    ONBOARDING_PAYLOAD,
    FindingFactory,
    make_request,
    make_user,
    onboarding_world,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


@pytest.fixture(autouse=True)
def no_csp_violations(page):
    """Every journey ends without the browser refusing anything under the Content-Security-Policy."""
    refused = []
    page.on(
        "console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None
    )
    yield
    assert not refused, refused


def test_requester_submits_a_request_and_follows_it_to_work_done(
    page, live_server, sign_in, axe_check, docs_screenshot
):
    world = onboarding_world()
    sign_in("bob")
    page.get_by_role("link", name="Submit a new request").click()
    axe_check("new request")
    page.get_by_label("Client name").fill("Contoso Ltd")
    page.get_by_label("Contact email").fill("x@")
    page.get_by_label("Plan").select_option("enterprise")
    page.get_by_role("button", name="Submit for approval").click()
    # The rules' reason, beside its field; nothing recorded.
    expect(page.locator("#id_contact_email-error")).to_contain_text("is too short")
    axe_check("new request with a reason")
    docs_screenshot("requester-new-request-with-reason")
    assert not Request.objects.filter(payload__client_name="Contoso Ltd").exists()

    page.get_by_label("Contact email").fill("ops@contoso.example")
    page.get_by_role("button", name="Submit for approval").click()
    expect(page.get_by_role("status").first).to_contain_text("awaits an approver")
    created = Request.objects.get(payload__client_name="Contoso Ltd")
    expect(page).to_have_url(re.compile(f"/approvals/7/{created.number}/1/$"))
    axe_check("request detail (requester)")

    page.locator('nav[aria-label="Main"]').get_by_role("link", name="My requests").click()
    row = page.locator(f"#my-request-7-{created.number}")
    expect(row.locator('[data-line="request"]')).to_contain_text("Awaiting an approver since")

    # An approver decides and the dispatcher delivers, as the django-q2 cluster would.
    request_approve(
        workspace_id=7,
        number=created.number,
        revision=1,
        actor=world["alice"],
        payload_hash=created.payload_hash,
    )
    assert drain().delivered == 1
    handoff = Handoff.objects.get(source_id=created.pk)
    page.reload()
    expect(row.locator('[data-line="request"]')).to_contain_text("Approved by alice at")
    # A created task is not finished work: the receipt proves the task, with its time; the work is open.
    expect(row.locator('[data-line="step"]')).to_contain_text(
        f"task {handoff.destination_id[:8]}… confirmed by the receiver (receipt validated) at"
    )
    expect(row.locator('[data-line="step"]')).to_contain_text("the receiver reports it open")

    # The people doing the task finish it; reconciliation reads the status back.
    task_status_set(action_key=handoff.action_key, status="done")
    assert reconciliation_run().work_statuses_recorded == 1
    page.reload()
    expect(row.locator('[data-line="request"]')).to_contain_text(
        "done: the work of every step is done"
    )
    axe_check("my requests")
    docs_screenshot("requester-my-requests")


def test_approver_rejects_with_confirmation_and_meets_a_replaced_revision_with_its_diff(
    page, live_server, sign_in, axe_check, docs_screenshot
):
    world = onboarding_world()
    make_request(
        world["w7"], 43, world["bob"], payload={**ONBOARDING_PAYLOAD, "client_name": "Contoso Ltd"}
    )
    sign_in("alice")
    page.get_by_role("link", name="Approvals").click()
    first = page.locator("table.queue tbody tr").first
    expect(first).to_contain_text("Northwind Traders")
    expect(first).to_contain_text("standard")
    expect(first).to_contain_text("bob")
    axe_check("approvals queue")
    docs_screenshot("approver-queue")

    # Reject asks first, naming the request and the reason; nothing is decided until confirmed.
    page.get_by_role("link", name="onboarding request 42").click()
    page.get_by_label("Reason (required to reject)").fill("duplicate of request 12")
    page.get_by_role("button", name="Reject…").click()
    expect(page.locator("#confirm-reject")).to_contain_text("duplicate of request 12")
    axe_check("reject confirmation")
    assert Request.objects.get(number=42).state == RequestState.AWAITING_APPROVAL
    page.get_by_role("button", name="Yes, reject request 42").click()
    expect(page.locator("#request-state")).to_have_text("Rejected")

    # Request 43 changes while it is on screen: approving shows the new revision and what changed.
    page.goto(f"{live_server.url}/approvals/7/43/1/")
    request_revise(
        workspace_id=7,
        number=43,
        payload={**ONBOARDING_PAYLOAD, "client_name": "Contoso Ltd", "plan": "enterprise"},
        actor=world["bob"],
    )
    page.get_by_role("button", name="Approve exactly this payload").click()
    diff = page.locator("table.diff")
    expect(diff.locator('[data-field="plan"] del')).to_have_text("standard")
    expect(diff.locator('[data-field="plan"] ins')).to_have_text("enterprise")
    expect(diff.locator("[data-field]")).to_have_count(1)
    expect(page).to_have_url(re.compile("/approvals/7/43/2/$"))
    axe_check("replaced revision with its diff")
    docs_screenshot("approver-replaced-revision-diff")
    page.get_by_role("button", name="Approve exactly this payload").click()
    expect(page.locator("#request-state")).to_have_text("Approved")
    assert Handoff.objects.get(source_ref="request 43 revision 2").action_key == "onboarding:7:43:2"


def _failed_world():
    world = onboarding_world()
    uncertain = request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    handoff_deliver(
        handoff_id=uncertain.pk,
        destination=InProcessDestination(lose_ack_for={uncertain.action_key}),
    )
    request = make_request(
        world["w7"],
        50,
        world["bob"],
        payload={
            **ONBOARDING_PAYLOAD,
            "client_name": "   ",
            # Found by its e-mail: free fields such as notes are searched only where the workflow marks them.
            "contact_email": "ops@fabrikam.example",
            "notes": "Fabrikam onboarding",
        },
    )
    rejected = request_approve(
        workspace_id=7,
        number=50,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    handoff_deliver(handoff_id=rejected.pk)
    states = dict(Handoff.objects.values_list("pk", "state"))
    assert (states[uncertain.pk], states[rejected.pk]) == (
        HandoffState.UNCERTAIN,
        HandoffState.NEEDS_ATTENTION,
    )
    return world, uncertain, rejected


def test_operator_triages_from_the_list_with_the_address_always_the_filter(
    page, live_server, sign_in, axe_check, docs_screenshot
):
    _world, uncertain, rejected = _failed_world()
    sign_in("olga")
    page.get_by_role("link", name="Handoffs", exact=True).click()
    axe_check("handoff list")
    docs_screenshot("operator-handoff-list")

    page.get_by_label("State").select_option("uncertain")
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=uncertain$"))
    expect(page.locator(f"#handoff-{uncertain.pk}")).to_be_visible()
    expect(page.locator(f"#handoff-{rejected.pk}")).to_have_count(0)

    page.get_by_label("State").select_option("needs_attention")
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=needs_attention$"))
    expect(page.locator(f"#handoff-{rejected.pk}")).to_be_visible()

    # Enter in the search box sends exactly one GET, and the address follows. The list's own refresh (every
    # 15 s, marked by its header) is not the search's: on a loaded machine one fell between Enter and the check.
    sent = []
    page.on(
        "request",
        lambda r: (
            sent.append(r.url)
            if "/handoffs/?" in r.url and "x-console-refresh" not in r.headers
            else None
        ),
    )
    search = page.get_by_label(re.compile("^Search"))
    search.fill("Fabrikam")
    search.press("Enter")
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=needs_attention&q=Fabrikam$"))
    expect(page.locator(f"#handoff-{rejected.pk}")).to_be_visible()
    assert len(sent) == 1, sent

    # Back restores the previous filter: address, form and results agree.
    page.go_back()
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=needs_attention$"))
    expect(page.get_by_label("State")).to_have_value("needs_attention")
    expect(search).to_have_value("")
    page.go_back()
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=uncertain$"))
    expect(page.get_by_label("State")).to_have_value("uncertain")
    expect(page.locator(f"#handoff-{uncertain.pk}")).to_be_visible()
    expect(page.locator(f"#handoff-{rejected.pk}")).to_have_count(0)

    # Triage from the list: the rejected one is acknowledged in its row (the row is re-rendered in place).
    page.go_forward()
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=needs_attention$"))
    rejected_row = page.locator(f"#handoff-{rejected.pk}")
    rejected_row.get_by_role("button", name="Acknowledge").click()
    expect(page.locator(f"#handoff-{rejected.pk}")).to_contain_text("Acknowledged by olga.")
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=needs_attention$"))
    page.go_back()
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=uncertain$"))

    # Triage: the uncertain one is reconciled from its page, and it is delivered.
    page.locator(f"#handoff-{uncertain.pk}").get_by_role("link", name=uncertain.action_key).click()
    expect(page.locator("#next-step")).to_contain_text("Outcome unknown: reconcile first.")
    axe_check("handoff detail")
    docs_screenshot("operator-handoff-detail")
    page.locator("#handoff-actions").get_by_role("button", name="Reconcile").click()
    expect(page.locator("#handoff-state")).to_have_text("Delivered")


def test_list_refreshes_itself_while_the_tab_is_visible(page, live_server, sign_in):
    world = onboarding_world()
    page.clock.install()
    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/?state=pending")
    expect(page.locator("table.handoffs")).to_contain_text("No handoffs match.")
    handoff = request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    page.clock.fast_forward("00:16")
    expect(page.locator(f"#handoff-{handoff.pk}")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/handoffs/\?state=pending$"))


def sweep_world():
    """Every kind of handoff page a person meets: waiting, uncertain, rejected by the receiver, and
    delivered with an open reconciliation finding (its evidence shown side by side)."""
    world, uncertain, rejected = _failed_world()
    pending = request_approve(
        workspace_id=7,
        number=51,
        revision=1,
        actor=world["alice"],
        payload_hash=make_request(
            world["w7"],
            51,
            world["bob"],
            # A long unbroken value (a link pasted into the notes) is wider than a phone.
            payload={**ONBOARDING_PAYLOAD, "notes": "https://crm.example/" + "x" * 120},
        ).payload_hash,
    )
    delivered = request_approve(
        workspace_id=7,
        number=52,
        revision=1,
        actor=world["alice"],
        payload_hash=make_request(world["w7"], 52, world["bob"]).payload_hash,
    )
    handoff_deliver(handoff_id=delivered.pk)
    FindingFactory(
        kind=FindingKind.PAYLOAD_MISMATCH,
        action_key=delivered.action_key,
        source_evidence={"client_name": "Northwind Traders", "plan": "standard"},
        receiver_evidence={"client_name": "Northwind Trading", "plan": "enterprise"},
        next_action="Compare the receiver's task with the approved payload, then repair at the "
        "receiver and record the repair here.",
    )
    return world, [pending, uncertain, rejected, delivered]


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("username", ["alice", "bob", "olga", "support"])
def test_every_screen_of_each_person_passes_axe(
    page, live_server, sign_in, axe_check, username, width
):
    _world, handoffs = sweep_world()
    make_user("support", is_staff=True)
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(username)
    axe_check(f"home ({username}, {width} px)")
    links = page.locator('nav[aria-label="Main"] a')
    pages = [
        (links.nth(i).inner_text(), links.nth(i).get_attribute("href"))
        for i in range(links.count())
    ]
    for name, href in pages:
        if name == "Admin":
            continue
        page.goto(f"{live_server.url}{href}")
        expect(page.locator("h1")).to_be_visible()
        axe_check(f"{name} ({username}, {width} px)")
    for handoff in handoffs:
        page.goto(f"{live_server.url}/handoffs/{handoff.pk}/")
        axe_check(f"handoff {handoff.action_key} ({username}, {width} px)")
    page.goto(f"{live_server.url}/approvals/7/42/1/")
    axe_check(f"request detail ({username}, {width} px)")
    if username == "olga":
        page.goto(f"{live_server.url}/health/")
        page.locator(".figure a").first.click()
        expect(page.locator("h1")).to_be_visible()
        axe_check(f"health drill-down ({username}, {width} px)")
        page.goto(f"{live_server.url}/destinations/receiver/")
        expect(page.locator("h1")).to_be_visible()
        axe_check(f"destination page ({username}, {width} px)")
    page.goto(f"{live_server.url}/no-such-page/")
    expect(page.locator("h1")).to_have_text("Not found")
    axe_check(f"404 ({username}, {width} px)")


def test_refusals_name_their_page_and_pass_axe(
    page, live_server, sign_in, axe_check, docs_screenshot
):
    onboarding_world()
    sign_in("alice")
    page.goto(f"{live_server.url}/reconciliation/findings/")
    expect(page.locator("h1")).to_have_text("Not allowed: Findings")
    axe_check("403 findings")
    page.goto(f"{live_server.url}/reconciliation/runs/")
    expect(page.locator("h1")).to_have_text("Not allowed: Runs")
    axe_check("403 runs")
    docs_screenshot("refusal-names-its-page")


def test_sign_in_page_passes_axe(page, live_server, axe_check, docs_screenshot):
    page.goto(f"{live_server.url}/accounts/login/")
    axe_check("sign in")


def test_list_and_detail_fit_a_390px_phone_with_a_collapsing_nav(
    page, live_server, sign_in, axe_check, no_horizontal_scroll, docs_screenshot
):
    _world, uncertain, _rejected = _failed_world()
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in("olga")
    menu = page.get_by_role("button", name="Menu")
    nav = page.locator('nav[aria-label="Main"]')
    expect(menu).to_be_visible()
    expect(nav).to_be_hidden()
    menu.click()
    expect(nav.get_by_role("link", name="Findings")).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(page.get_by_role("button", name="Sign out")).to_be_in_viewport()
    nav.get_by_role("link", name="Handoffs", exact=True).click()
    expect(page.locator(f"#handoff-{uncertain.pk}")).to_be_visible()
    no_horizontal_scroll("handoff list")
    axe_check("handoff list at 390 px")
    docs_screenshot("phone-handoff-list")
    page.goto(f"{live_server.url}/handoffs/{uncertain.pk}/")
    expect(page.locator("#handoff-state")).to_have_text("Uncertain")
    no_horizontal_scroll("handoff detail")
    axe_check("handoff detail at 390 px")
    docs_screenshot("phone-handoff-detail")


def test_nav_at_1280px_fits_on_screen(page, live_server, sign_in, no_horizontal_scroll):
    onboarding_world()
    make_user("omar", workspace=None)
    page.set_viewport_size({"width": 1280, "height": 800})
    sign_in("olga")
    expect(page.get_by_role("link", name="Findings")).to_be_in_viewport()
    expect(page.get_by_role("button", name="Sign out")).to_be_in_viewport()
    no_horizontal_scroll("home at 1280 px")
    assert Role.OPERATOR
