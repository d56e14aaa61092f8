"""Context-specific words are refused in new passwords (ASVS 6.1.2, 6.2.11): the documented list of the
product's words (docs/security.md, PASSWORD_CONTEXT_WORDS), an install's own, every workspace's name, the role
names and the person's own names, matched whatever the case or punctuation."""

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client

from tests.factories import make_user, make_workspace

pytestmark = pytest.mark.django_db

SECURITY_MD = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def refusal(password: str, user=None) -> str:
    try:
        validate_password(password, user)
    except ValidationError as refused:
        assert [error.code for error in refused.error_list] == ["password_context_word"]
        return refused.messages[0]
    return ""


@pytest.mark.parametrize(
    ("password", "word"),
    [
        ("my-Hand-Off-2026-tulip", "handoff"),
        ("tulip-the-APPROVER-77", "approver"),
        ("north-wind payroll 1999", "northwindpayroll"),
        ("tulip-acme-corp-7791", "acmecorp"),
        ("Dana-Whitfield-tulip9", "whitfield"),
    ],
)
def test_a_password_with_a_word_of_the_context_is_refused_naming_it(settings, password, word):
    settings.PASSWORD_CONTEXT_WORDS = [*settings.PASSWORD_CONTEXT_WORDS, "Acme Corp"]
    make_workspace(7, name="Northwind Payroll")
    dana = make_user("dana", first_name="Dana", last_name="Whitfield")
    assert word in refusal(password, dana)
    assert refusal("quiet-walrus-7-orbit", dana) == ""


def test_the_password_change_page_refuses_the_users_own_name_and_a_workspaces():
    make_workspace(7, name="Northwind Payroll")
    make_user("alice")
    client = Client()
    assert (
        client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"}).status_code
        == 302
    )
    for new in ("alice-tulip-2026-x", "tulip-NORTHWIND-payroll"):
        form = {"old_password": "pw-alice", "new_password1": new, "new_password2": new}
        answer = client.post("/accounts/password/", form)
        assert answer.status_code == 200 and "a word of this product" in answer.content.decode()


def test_the_documented_list_is_the_one_in_force():
    documented = SECURITY_MD.read_text(encoding="utf-8")
    missing = [
        word for word in django_settings.PASSWORD_CONTEXT_WORDS if f"`{word}`" not in documented
    ]
    assert not missing, f"docs/security.md does not list {missing}"
