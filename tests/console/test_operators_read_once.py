"""The list reads its workspaces' operators once, for the owner filter's choices and the assign menu alike:
no query of their own (issue 40)."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import Role
from tests.console.clients import client_for
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _get(client, url: str):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in captured.captured_queries]


def _options(page: str, select_name: str) -> list[str]:
    start = page.index(f'name="{select_name}"')
    menu = page[start : page.index("</select>", start)]
    return re.findall(r"<option value=\"(\w*)\"[^>]*>([^<]*)</option>", menu)


def test_list_reads_operators_once_and_names_the_same_people(world, rejected):
    # Someone who left: still an owner one can filter on, no longer someone to assign to.
    gone = make_user("gil", workspace=world["w7"], roles=(Role.OPERATOR,))
    gone.is_active = False
    gone.save(update_fields=["is_active"])

    page, queries = _get(client_for(world["olga"]), "/handoffs/")

    operator_reads = [q for q in queries if '"approvals_membership"' in q and '"auth_user"' in q]
    assert len(operator_reads) == 1, operator_reads
    owners = [name for _value, name in _options(page, "owner")]
    assert owners == ["anyone", "me", "nobody", "gil", "olga", "oscar"]
    assignable = _options(page, "bulk_owner")
    assert assignable == [
        ("", "nobody"),
        (str(world["olga"].pk), "olga"),
        (str(world["oscar"].pk), "oscar"),
    ], "active operators of the workspaces where the viewer operates, by name, once each"
