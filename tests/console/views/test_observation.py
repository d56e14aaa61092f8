"""The observation screens: workspace scoping (404), who may record, explain and go live (403 with the
reason), the CSV upload refused row by row with nothing written, and the audit export of what happened."""

import json
import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from approvals.models import Mode, ObservedOutcome, WorkflowMode
from console.audit_trail.export import audit_export
from tests.approvals.observation_world import observed_world
from tests.console.clients import client_for


@pytest.fixture
def world(db):
    return observed_world()


def _agreement_url():
    return reverse("observation:agreement", args=[7, "onboarding-v1"])


def _record_url(key):
    return reverse("observation:record", args=[7, key])


def _record(client, key, created="yes", **extra):
    return client.post(_record_url(key), {"task_created": created, **extra})


def test_another_workspaces_member_gets_404_on_every_observation_page_and_action(world):
    mallory = client_for(world["mallory"])
    key = world["cases"][0]
    assert mallory.get(_agreement_url()).status_code == 404
    assert mallory.get(_record_url(key)).status_code == 404
    assert _record(mallory, key).status_code == 404
    upload = SimpleUploadedFile("o.csv", b"action_key,task_created\nx,yes\n")
    import_url = reverse("observation:import", args=[7, "onboarding-v1"])
    assert mallory.post(import_url, {"file": upload}).status_code == 404
    assert mallory.post(reverse("observation:explain", args=[7, 1]), {}).status_code == 404
    # Nor is workspace 7's case reachable through workspace 8's address.
    assert (
        client_for(world["otto"]).get(reverse("observation:record", args=[8, key])).status_code
        == 404
    )
    assert not ObservedOutcome.objects.exists()


def test_an_operator_records_an_outcome_and_the_page_shows_it_beside_the_plan(world):
    olga = client_for(world["olga"])
    answer = _record(
        olga, world["cases"][0], created="no", outcome="closed by phone", reference="T-9"
    )
    assert answer.status_code == 302
    page = olga.get(_agreement_url()).content.decode()
    disagree = re.search(r'id="count-disagree">(.*?)</dd>', page).group(1)
    assert re.sub(r"<[^>]+>", "", disagree) == "1 (1 not explained by the owner)"
    assert "onboarding: a task at receiver" in page
    assert "closed by phone" in page
    assert "recorded by olga" in page


def test_an_approver_who_does_not_own_the_workflow_may_view_but_not_record(world):
    alice = client_for(world["alice"])
    assert alice.get(_agreement_url()).status_code == 200
    refused = _record(alice, world["cases"][0])
    assert refused.status_code == 403
    assert "Only an operator of workspace 7 or the owner of onboarding" in refused.content.decode()
    assert not ObservedOutcome.objects.exists()


def test_a_bad_csv_is_refused_with_its_rows_named_and_nothing_written(world):
    a, _, _ = world["cases"]
    data = f"action_key,task_created\n{a},yes\nonboarding:7:999:1,yes\n{world['foreign_case']},no\n"
    answer = client_for(world["olga"]).post(
        reverse("observation:import", args=[7, "onboarding-v1"]),
        {"file": SimpleUploadedFile("o.csv", data.encode())},
    )
    body = answer.content.decode()
    assert answer.status_code == 422
    assert "row 3: no observed case &#x27;onboarding:7:999:1&#x27; in workspace 7" in body
    assert "row 4: no observed case" in body
    assert not ObservedOutcome.objects.exists()


def test_a_good_csv_is_imported(world):
    a, b, _ = world["cases"]
    data = f"action_key,task_created,outcome\n{a},yes,by hand\n{b},no,phoned\n"
    answer = client_for(world["olga"]).post(
        reverse("observation:import", args=[7, "onboarding-v1"]),
        {"file": SimpleUploadedFile("o.csv", data.encode())},
    )
    assert answer.status_code == 302
    assert ObservedOutcome.objects.current().count() == 2


def _go_live(client, confirmation="onboarding"):
    return client.post(
        reverse("observation:go_live", args=["onboarding"]), {"confirmation": confirmation}
    )


def test_a_non_owner_sees_the_results_and_is_refused_the_switch_with_the_reason(world):
    _record(client_for(world["olga"]), world["cases"][0])
    olga = client_for(world["olga"])
    page = olga.get(reverse("observation:go_live", args=["onboarding"])).content.decode()
    assert "only onboarding&#x27;s owner, dana, confirms" in page
    assert 'id="go-live-form"' not in page
    refused = _go_live(olga)
    assert refused.status_code == 403
    assert "Only onboarding&#x27;s owner, dana, confirms" in refused.content.decode()
    assert WorkflowMode.objects.get(workflow="onboarding").mode == Mode.OBSERVE


def _explain_and_go_live(world):
    _record(client_for(world["olga"]), world["cases"][0], created="no")
    dana = client_for(world["dana"])
    blocked = dana.get(reverse("observation:go_live", args=["onboarding"])).content.decode()
    assert "1 disagreement(s) are not explained yet" in blocked
    row = ObservedOutcome.objects.get()
    explained = dana.post(
        reverse("observation:explain", args=[7, row.pk]), {"explanation": "phone closures"}
    )
    assert explained.status_code == 302
    assert _go_live(dana, confirmation="wrong").status_code == 422
    assert _go_live(dana).status_code == 302


def test_the_owner_explains_the_disagreement_then_confirms_and_the_workflow_is_live(world):
    _explain_and_go_live(world)
    assert WorkflowMode.objects.get(workflow="onboarding").mode == Mode.LIVE


def test_the_audit_export_holds_the_recording_the_explanation_and_the_switch(world):
    _explain_and_go_live(world)
    now = timezone.now()
    export = audit_export(
        actor=world["olga"],
        workspace_id=7,
        start=now - timedelta(hours=1),
        end=now + timedelta(hours=1),
        fmt="jsonl",
        channel="console",
    )
    actions = {(r["kind"], r["action"]) for r in map(json.loads, export.content.splitlines())}
    assert {
        ("observed_outcome", "record_outcome_form"),
        ("observed_outcome", "explain_disagreement"),
        ("workflow_mode_change", "set_mode"),
    } <= actions


def test_disagreements_are_paged_and_the_page_reads_a_fixed_number_of_queries(
    world, django_assert_max_num_queries
):
    rows = [
        ObservedOutcome(
            workspace_id=7,
            workflow="onboarding",
            rule_version="onboarding-v1",
            action_key=f"onboarding:7:{900 + n}:1",
            task_created=False,
            source="csv",
            recorded_by=world["olga"],
            agrees=False,
            difference="none created",
        )
        for n in range(25)
    ]
    ObservedOutcome.objects.bulk_create(rows)
    olga = client_for(world["olga"])
    with django_assert_max_num_queries(20):
        first = olga.get(_agreement_url())
    body = first.content.decode()
    assert body.count('id="disagreement-') == 20
    after = re.search(r'href="\?after=([^"]+)">Older disagreements', body).group(1)
    second = olga.get(_agreement_url() + f"?after={after}").content.decode()
    assert second.count('id="disagreement-') == 5
    assert "Older disagreements" not in second
    assert olga.get(_agreement_url() + "?after=nonsense").status_code == 400
