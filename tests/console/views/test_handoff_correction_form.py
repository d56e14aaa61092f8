"""The operator's correction form on a handoff's page is labelled and typed as the request form is (issue 24,
item 5: it showed raw field names, every one a text box): a plan is a choice of the rules' plans, an e-mail an
e-mail field, a hidden value says that blank keeps it; what is posted still reaches the correction."""

import re

import pytest
from django.urls import reverse

from approvals.models import Request
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _correct_form(page: str) -> str:
    match = re.search(r'<details id="correct".*?</details>', page, re.S)
    assert match, "the handoff page offers the correction"
    return match.group(0)


def test_the_correction_form_labels_and_types_its_fields_as_the_request_form(world, rejected):
    form = _correct_form(
        client_for(world["olga"]).get(f"/handoffs/{rejected.pk}/").content.decode()
    )
    assert '<label for="id_field_client_name">Client name</label>' in form
    assert re.search(r'<select name="field_plan"[^>]*id="id_field_plan"', form), form
    assert '<option value="standard" selected>' in form
    assert re.search(r'<input type="email" name="field_contact_email"', form), form
    assert ">client_name<" not in form and 'type="text" name="field_plan"' not in form
    assert "hidden; leave blank to keep" in form, (
        "the e-mail is hidden from operators: blank keeps it"
    )


def test_the_typed_form_still_corrects_the_request(world, rejected):
    response = client_for(world["olga"]).post(
        reverse("outbox:correct", args=(rejected.pk,)),
        {
            "field_client_name": "Fabrikam Ltd",
            "field_plan": "standard",
            "field_contact_email": "",
            "reason": "client name was blank",
        },
    )
    assert response.status_code in (200, 302), response.content[:300]
    revision = Request.objects.get(number=50, revision=2)
    assert revision.payload["client_name"] == "Fabrikam Ltd"
    assert revision.payload["contact_email"] == "onboarding@northwind.example", "blank kept it"
