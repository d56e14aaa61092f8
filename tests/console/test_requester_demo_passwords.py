"""The demo password can be recovered: `manage.py demo_passwords` sets and prints new ones."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_demo_passwords_sets_a_new_password_that_signs_every_demo_user_in():
    call_command("demo", password="first-password", stdout=StringIO())
    out = StringIO()
    call_command("demo_passwords", stdout=out)
    # The password alone on the last line, under the line that says whose it is.
    new = out.getvalue().strip().splitlines()[-1].strip()
    assert new != "first-password"
    for username in ("alice", "bob", "olga", "mallory", "support"):
        user = get_user_model().objects.get(username=username)
        assert user.check_password(new), username
        assert not user.check_password("first-password"), username


def test_demo_passwords_takes_a_chosen_password():
    call_command("demo", stdout=StringIO())
    out = StringIO()
    call_command("demo_passwords", password="chosen-pw-123", stdout=out)
    assert "chosen-pw-123" in out.getvalue()
    assert get_user_model().objects.get(username="bob").check_password("chosen-pw-123")


def test_second_demo_load_names_the_reset_command():
    call_command("demo", stdout=StringIO())
    out = StringIO()
    call_command("demo", stdout=out)
    assert "passwords unchanged" in out.getvalue() and "demo_passwords" in out.getvalue()


def test_demo_passwords_without_demo_data_says_what_to_run():
    with pytest.raises(CommandError, match="manage.py demo"):
        call_command("demo_passwords", stdout=StringIO())
