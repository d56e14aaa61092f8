"""The RECEIVER_* variables seed the default destination only: once its row exists, one that disagrees with
the row is refused (by `manage.py check` and `destinations check`, and at the dispatcher's start), naming
where the value now lives; one that agrees (the demo's RECEIVER_URL) passes."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError

from outbox.models import DestinationConfig

pytestmark = pytest.mark.django_db
URL = "http://127.0.0.1:9/delivery/api"


@pytest.fixture
def seeded_from_the_environment(settings):
    """RECEIVER_URL and RECEIVER_READ_TIMEOUT set, as the outside test had them."""
    settings.HANDOFF_DESTINATION = {
        **settings.HANDOFF_DESTINATION,
        "url": URL,
        "read_timeout": 1.5,
    }
    settings.HANDOFF_DESTINATION_SEED_VARIABLES = {
        "RECEIVER_URL": "url",
        "RECEIVER_READ_TIMEOUT": "read_timeout",
    }


def test_a_read_timeout_the_receiver_row_overrides_is_refused_naming_where_it_lives(
    seeded_from_the_environment,
):
    DestinationConfig.objects.create(
        name="receiver", kind="http", config={"url": URL, "read_timeout": 5.0}
    )
    with pytest.raises(SystemCheckError) as refused:
        call_command("check")
    message = str(refused.value)
    assert "(outbox.E001) RECEIVER_READ_TIMEOUT (1.5) no longer applies" in message
    assert "destination 'receiver' is a row now, whose read_timeout is 5.0" in message
    assert "manage.py destinations apply FILE" in message
    assert "RECEIVER_URL" not in message  # it agrees with the row: it changes nothing
    with pytest.raises(CommandError, match="RECEIVER_READ_TIMEOUT .* no longer applies"):
        call_command("destinations", "check", stdout=StringIO())
    with pytest.raises(CommandError, match="cannot dispatch: RECEIVER_READ_TIMEOUT"):
        call_command("dispatch", "--once", stdout=StringIO(), skip_checks=True)


def test_a_variable_the_row_does_not_set_is_refused_too(seeded_from_the_environment):
    DestinationConfig.objects.create(name="receiver", kind="http", config={"url": URL})
    with pytest.raises(SystemCheckError, match="whose read_timeout is not set"):
        call_command("check")


def test_the_variables_seed_freely_while_no_row_of_the_default_name_exists(
    seeded_from_the_environment,
):
    DestinationConfig.objects.create(name="crm", kind="http", config={"url": URL})
    call_command("check", stdout=StringIO())
