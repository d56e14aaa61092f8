"""The audit export: a scripted day of workspace 7 (and of workspace 8 beside it) comes out whole, counted,
with nothing of workspace 8; each export is recorded and appears in the next; support staff get only the
kinds their group may view; others are refused (404 outside the workspace, 403 without the role)."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from approvals.models import Approval, AuditExport, RequestEvent, Role
from approvals.services import membership_grant, support_staff_enroll
from approvals.services.workflow_modes import workflow_mode_set
from console.audit_trail.export import audit_export
from console.audit_trail.period import parse_period
from incidents.models import Incident, IncidentKind, IncidentMember, IncidentSeverity
from incidents.services.incidents import incident_resolve, incidents_sync
from incidents.services.operator import incident_acknowledge
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import HandoffEvent
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_resume_by_operator,
)
from outbox.services.operator import handoff_cancel
from reconciliation.models import ManualRepair
from tests.builders import approve
from tests.builders import record as record_handoff
from tests.console.clients import client_for
from tests.factories import make_user, onboarding_world
from tests.incidents.test_incidents import REJECTED

pytestmark = pytest.mark.django_db

# What the scripted day writes in workspace 7, kind by kind (the export must hold exactly these):
EXPECTED_WS7 = {
    "request_event": 2,  # request 42 submitted; approved by alice
    "decision": 1,  # alice's approval
    "handoff_event": 2,  # the handoff recorded with the approval; cancelled by olga
    "role_change": 1,  # bob made operator by the admin
    "repair": 1,  # olga's manual repair record
    "incident_event": 1,  # olga resolves an incident that holds the cancelled handoff
    "destination_event": 1,  # olga pauses the receiver: every workspace's trail
    "workflow_mode_change": 1,  # the admin sets onboarding to observe: every workspace's trail
}


def _repair(*, workspace_id: int, key: str, actor) -> ManualRepair:
    return ManualRepair.objects.create(
        workspace_id=workspace_id,
        action_key=key,
        actor=actor,
        actor_label=actor.username,
        what_was_done="re-created the client by hand in the CRM",
        evidence="ticket OPS-17",
        resulting_state="delivered",
    )


def _resolved_incident(handoff, *, actor) -> Incident:
    incident = Incident.objects.create(
        cause="failures:receiver",
        workspace_id=handoff.workspace_id,
        kind=IncidentKind.FAILURES,
        severity=IncidentSeverity.QUEUE,
        title="handoffs failing",
    )
    IncidentMember.objects.create(
        incident=incident,
        member_key=f"handoff:{handoff.pk}",
        handoff_id=handoff.pk,
        workspace_id=handoff.workspace_id,
        action_key=handoff.action_key,
    )
    incident_resolve(incident, actor=actor, note=f"handled {handoff.action_key}")
    return incident


@pytest.fixture
def day():
    """One day of work in workspaces 7 and 8 through the services, plus an older event of workspace 7."""
    world = onboarding_world()
    admin = get_user_model().objects.create_superuser("admin", password="admin-long-password")
    world["admin"] = admin
    start = timezone.now() - timedelta(hours=1)
    old = approve(world, number=41)  # yesterday's work: outside the period
    yesterday = start - timedelta(days=1)
    HandoffEvent.objects.filter(handoff=old).update(at=yesterday)
    RequestEvent.objects.filter(request__number=41).update(at=yesterday)
    Approval.objects.filter(request__number=41).update(decided_at=yesterday)

    handoff = approve(world)
    handoff_cancel(handoff_id=handoff.pk, actor=world["olga"], reason="client withdrew")
    membership_grant(
        workspace_id=7, user=world["bob"], role=Role.OPERATOR, actor=admin, reason="covers nights"
    )
    _repair(workspace_id=7, key=handoff.action_key, actor=world["olga"])
    _resolved_incident(handoff, actor=world["olga"])
    destination_pause_by_operator(name="receiver", actor=world["olga"], reason="CRM upgrade")
    workflow_mode_set(workflow="onboarding", mode="observe", actor=admin, reason="audit week")

    # Workspace 8, the same day: none of it may appear in workspace 7's trail.
    world["rex"] = make_user("rex", workspace=world["w8"], roles=(Role.REQUESTER,))
    other = approve(world, number=9, workspace=world["w8"], requested_by=world["rex"])
    membership_grant(
        workspace_id=8, user=world["rex"], role=Role.OPERATOR, actor=admin, reason="ws8 change"
    )
    _repair(workspace_id=8, key=other.action_key, actor=world["mallory"])
    _resolved_incident(other, actor=world["mallory"])
    world["other_key"] = other.action_key
    world["old_key"] = old.action_key
    world["period"] = {"since": start.isoformat(), "until": (start + timedelta(days=1)).isoformat()}
    return world


def _export(client, *, workspace=7, fmt="jsonl", **period):
    return client.post(
        "/audit/export", {"workspace": str(workspace), "format": fmt, **period}, secure=False
    )


def _lines(answer) -> list[dict]:
    return [json.loads(line) for line in answer.content.decode().splitlines()]


def _by_kind(records) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        counts[record["kind"]] = counts.get(record["kind"], 0) + 1
    return counts


def test_a_workspaces_export_holds_every_event_of_the_day_and_nothing_of_another(day):
    answer = _export(client_for(day["olga"]), **day["period"])
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("application/jsonl")
    records = _lines(answer)
    assert _by_kind(records) == EXPECTED_WS7
    assert len(records) == sum(EXPECTED_WS7.values())
    assert {r["workspace"] for r in records} <= {7, None}
    text = answer.content.decode()
    assert day["other_key"] not in text
    assert "ws8 change" not in text and "rex" not in text
    assert day["old_key"] not in text and "request 41 " not in text
    cancel = next(r for r in records if r["action"] == "cancel")
    assert (cancel["actor"], cancel["before"], cancel["after"], cancel["reason"]) == (
        "olga",
        "pending",
        "cancelled",
        "client withdrew",
    )
    grant = next(r for r in records if r["kind"] == "role_change")
    assert (grant["actor"], grant["before"], grant["after"]) == ("admin", "", "operator")
    assert [r["at"] for r in records] == sorted(r["at"] for r in records)


def test_an_export_is_recorded_and_appears_in_the_next_one(day):
    client = client_for(day["olga"])
    first = _export(client, fmt="csv", **day["period"])
    rows = list(csv.DictReader(io.StringIO(first.content.decode())))
    export = AuditExport.objects.get()
    assert (export.workspace_id, export.exported_by, export.format, export.channel) == (
        7,
        day["olga"],
        "csv",
        "console",
    )
    assert export.event_count == len(rows) == sum(EXPECTED_WS7.values())
    assert int(first["X-Audit-Export"]) == export.pk
    second = _lines(_export(client, **day["period"]))
    exports = [r for r in second if r["kind"] == "audit_export"]
    assert len(exports) == 1
    assert exports[0]["actor"] == "olga"
    assert exports[0]["after"] == f"{len(rows)} events"
    assert len(second) == len(rows) + 1
    assert AuditExport.objects.count() == 2


def test_support_staff_export_only_the_kinds_their_group_may_view(day):
    support = make_user("support", is_staff=True)
    support_staff_enroll(user=support)
    records = _lines(_export(client_for(support), **day["period"]))
    kinds = set(_by_kind(records))
    # The support group views requests, decisions, role changes and handoff events in admin; not the
    # repairs, the destinations' events or the record of exports.
    assert kinds == {
        "request_event",
        "decision",
        "role_change",
        "handoff_event",
        "workflow_mode_change",
    }
    assert set(AuditExport.objects.get().kinds) == kinds | {"finding_event"}


def test_a_member_without_the_operator_role_is_refused_and_nothing_is_recorded(day):
    answer = _export(client_for(day["alice"]), **day["period"])
    assert answer.status_code == 403
    assert not AuditExport.objects.exists()


def test_another_workspaces_trail_is_not_found_for_its_non_members(day):
    assert _export(client_for(day["mallory"]), **day["period"]).status_code == 404
    assert _export(client_for(day["olga"]), workspace=8, **day["period"]).status_code == 404
    assert _export(client_for(day["olga"]), workspace=999, **day["period"]).status_code == 404
    assert not AuditExport.objects.exists()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"since": "2026-12-02", "until": "2026-12-01"}, "end after it starts"),
        ({"since": "2024-01-01", "until": "2026-01-01"}, "at most 366 days"),
        ({"since": "2026-12-01", "format": "xlsx"}, "format must be one of"),
        ({"since": "2026-12-01", "workspace": "seven"}, "choose a workspace"),
    ],
)
def test_bad_input_is_a_422_with_the_reason_and_records_nothing(day, fields, reason):
    data = {"workspace": "7", "format": "csv", **fields}
    answer = client_for(day["olga"]).post("/audit/export", data)
    assert answer.status_code == 422
    assert reason in answer.content.decode()
    assert not AuditExport.objects.exists()


def test_the_page_offers_the_operators_workspaces_only(day):
    page = client_for(day["olga"]).get("/audit/").content.decode()
    assert "Client onboarding (#7)" in page
    assert "Supplier onboarding" not in page


def test_the_command_exports_as_the_named_user_and_is_recorded(day, tmp_path):
    out = tmp_path / "audit.jsonl"
    since, until = day["period"]["since"], day["period"]["until"]
    call_command(
        "audit_export",
        "--workspace=7",
        f"--from={since}",
        f"--until={until}",
        "--format=jsonl",
        "--as=olga",
        f"--output={out}",
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert _by_kind(records) == EXPECTED_WS7
    assert AuditExport.objects.get().channel == "command"


def test_the_command_records_no_export_it_could_not_write(day, tmp_path):
    """An --output the command cannot write (a folder that does not exist) ended in a traceback after the
    export was recorded: the audit said the trail left the console when nothing was written. It is refused
    first now, with the reason, and nothing is recorded."""
    since = day["period"]["since"]
    nowhere = tmp_path / "no-such-folder" / "audit.csv"
    with pytest.raises(CommandError, match="--output: cannot write"):
        call_command(
            "audit_export", "--workspace=7", f"--from={since}", "--as=olga", f"--output={nowhere}"
        )
    assert not AuditExport.objects.exists()
    assert not nowhere.exists()


def test_the_command_refuses_as_the_console_does(day):
    since = day["period"]["since"]
    with pytest.raises(CommandError, match="no such workspace among yours"):
        call_command("audit_export", "--workspace=7", f"--from={since}", "--as=mallory")
    with pytest.raises(CommandError, match="needs the operator role"):
        call_command("audit_export", "--workspace=7", f"--from={since}", "--as=alice")
    assert not AuditExport.objects.exists()


def test_the_export_reads_each_kind_in_one_query_however_many_events(
    day, django_assert_max_num_queries
):
    for number in range(50, 60):
        approve(
            day, number=number
        )  # submitted, approved, decided, recorded (observed): four events
    start, end = parse_period(day["period"]["since"], day["period"]["until"])
    # Workspace check, roles, one query per kind (eleven), the export's insert, and the transaction.
    with django_assert_max_num_queries(17):
        result = audit_export(
            actor=day["olga"], workspace_id=7, start=start, end=end, fmt="csv", channel="console"
        )
    assert len(result.records) == sum(EXPECTED_WS7.values()) + 10 * 4


def test_each_workspaces_export_lists_only_its_own_incidents_events_of_one_cause(day):
    """A cause failing in workspaces 7 and 8 is one incident each (the same cause string): 7's trail holds
    7's incident events and none of 8's. Fails on the old code, where the export took the events of every
    incident holding a member of the workspace, and one incident held both workspaces' members."""
    destination_resume_by_operator(name="receiver", actor=day["olga"], reason="upgrade done")
    for number, workspace_id in ((61, 7), (62, 8)):
        handoff = record_handoff(number, workspace_id=workspace_id, payload=REJECTED)
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    incidents_sync()
    failing = Incident.objects.live().filter(kind=IncidentKind.FAILURES)
    ours, theirs = (failing.get(workspace_id=ws) for ws in (7, 8))
    assert ours.cause == theirs.cause
    incident_acknowledge(incident_id=theirs.pk, actor=day["rex"], note="ws8 looks")
    records = _lines(_export(client_for(day["olga"]), **day["period"]))
    incident_subjects = {r["subject"] for r in records if r["kind"] == "incident_event"}
    assert f"incident {ours.pk} (failures)" in incident_subjects
    assert not any(s.startswith(f"incident {theirs.pk} ") for s in incident_subjects)
    assert "ws8 looks" not in json.dumps(records)
    theirs_records = _lines(_export(client_for(day["rex"]), workspace=8, **day["period"]))
    assert not any(
        r["subject"].startswith(f"incident {ours.pk} ")
        for r in theirs_records
        if r["kind"] == "incident_event"
    )
