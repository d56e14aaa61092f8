"""The approver's correction on the request page: typed, labelled fields as on the request form, and no
Approve button for the approver who corrected it (the decision service would refuse): the page and the
queue say why instead, and another approver decides."""

import pytest

from approvals.models import Request, RequestState, Role
from approvals.services import request_correct_by_approver
from tests.console.clients import client_for
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
APPROVE = 'value="approve"'


def corrected(world) -> Request:
    return request_correct_by_approver(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
        edits={"plan": "enterprise"},
        reason="contract",
    )


def test_the_correction_form_has_labelled_typed_fields_with_the_plan_as_a_choice(world):
    page = client_for(world["alice"]).get("/approvals/7/42/1/").content.decode()
    form = page[page.index('id="approver-correct"') :].split("</details>")[0]
    assert '<label for="id_field_client_name">Client name</label>' in form
    assert '<label for="id_field_plan">Plan</label>' in form
    assert '<select name="field_plan" id="id_field_plan">' in form
    assert '<option value="standard" selected>standard</option>' in form
    assert '<option value="enterprise">enterprise</option>' in form
    # Not the raw field names as labels, and not the plan as free text.
    assert '<input type="text" name="field_plan"' not in form and ">plan <" not in form


def test_the_approver_who_corrected_a_request_is_told_why_and_offered_no_approve_button(world):
    dana = make_user("dana", workspace=world["w7"], roles=(Role.APPROVER,))
    revision = corrected(world)
    alice = client_for(world["alice"])
    page = alice.get(f"/approvals/7/42/{revision.revision}/").content.decode()
    assert APPROVE not in page
    assert "You corrected it; another approver must approve it." in page
    assert "the approvers who may decide it: dana" in page
    queue = alice.get("/approvals/").content.decode()
    row = queue[queue.index('id="request-7-42-2"') :].split("</tr>")[0]
    assert "You corrected it; another approver must approve it." in row

    dana = client_for(dana)
    assert APPROVE in dana.get("/approvals/7/42/2/").content.decode()
    response = dana.post(
        "/approvals/7/42/2/decide",
        {"decision": "approve", "payload_hash": revision.payload_hash},
    )
    assert response.status_code == 302
    assert Request.objects.get(pk=revision.pk).state == RequestState.APPROVED
