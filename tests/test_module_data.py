"""tests/module_data.py: a module's data is built once, each test sees it as built, and none of it is left."""

import pytest
from django.contrib.auth.models import Group

from tests.module_data import module_transaction

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture(scope="module")
def built_once(django_db_setup, django_db_blocker):
    with module_transaction(django_db_blocker):
        with django_db_blocker.unblock():
            group = Group.objects.create(name="built once")
        yield group
    with django_db_blocker.unblock():
        assert not Group.objects.filter(name__startswith="built once").exists()


# Whichever of these runs second sees the module's row alone: the other's writes were undone after it.
@pytest.mark.parametrize("test", ["first", "second"])
def test_each_test_sees_the_module_data_and_none_of_another_tests_writes(built_once, test):
    assert list(Group.objects.values_list("name", flat=True)) == ["built once"]
    Group.objects.create(name=f"built once, then {test}")
    Group.objects.filter(pk=built_once.pk).update(name="built once, changed")
