"""The Audit export page in Chromium: an operator downloads a workspace's trail, which is recorded."""

import json
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import AuditExport
from outbox.services.operator import handoff_cancel
from tests.builders import approve
from tests.factories import onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_an_operator_downloads_the_days_trail_as_json_lines(page, live_server, sign_in, axe_check):
    world = onboarding_world()
    handoff = approve(world)
    handoff_cancel(handoff_id=handoff.pk, actor=world["olga"], reason="client withdrew")
    sign_in("olga")
    page.goto(f"{live_server.url}/audit/")
    expect(page.get_by_role("heading", name="Audit export")).to_be_visible()
    axe_check("audit export")
    page.get_by_label("From").fill(timezone.now().date().isoformat())
    page.get_by_label("Format").select_option("jsonl")
    with page.expect_download() as info:
        page.get_by_role("button", name="Export").click()
    download = info.value
    assert download.suggested_filename.endswith(".jsonl")
    text = Path(download.path()).read_text(encoding="utf-8")
    records = [json.loads(line) for line in text.splitlines()]
    cancel = [r for r in records if r["action"] == "cancel"]
    assert [(r["actor"], r["reason"]) for r in cancel] == [("olga", "client withdrew")]
    export = AuditExport.objects.get()
    assert (export.exported_by, export.event_count, export.channel) == (
        world["olga"],
        len(records),
        "console",
    )
