"""The alert channels' kinds (`webhook`, `pagerduty_events`) are the product's own: a destinations file that
names one is refused with the entry's field, and nothing is written."""

import pytest

from outbox.models import DestinationConfig
from outbox.services.destination_configs import DestinationsRefused, destination_configs_apply

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("kind", "config"),
    [
        ("webhook", {"url": "https://hooks.example/x", "secret_variable": "DJANGO_SECRET_KEY"}),
        (
            "pagerduty_events",
            {"url": "https://events.example/v2/enqueue", "routing_key_variable": "X"},
        ),
    ],
)
def test_a_destinations_file_naming_an_alert_channels_kind_is_refused_and_writes_nothing(
    kind, config
):
    document = {"destinations": [{"name": "hook", "kind": kind, **config}]}
    with pytest.raises(DestinationsRefused) as refused:
        destination_configs_apply(document=document, actor_label="ops")
    assert refused.value.problems == [
        f"destinations[0].kind: {kind!r} is the product's own (an alert channel's, written from its "
        "row: docs/incidents.md), not a destinations file's"
    ]
    assert not DestinationConfig.objects.exists()
