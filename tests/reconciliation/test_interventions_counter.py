"""handoff_manual_interventions_total and Health's count never go down (issue 40, where two features meet): a
user deleted (their events' actor set to null) left the interventions rule with their events (Health's count
dropped; the counter had them carried into an archived total); their events are now marked a deleted person's
(`HandoffEvent.actor_deleted`) and stay counted. The deploy that moved the counter to a person's rule left out
what the earlier rule counted (a receiver's status events, a sweep's end of a hold): that was carried into an
archived total once, so the counter kept its value."""

import pytest

from outbox.dispatch.dispatcher import handoff_deliver
from outbox.failures import DeliveryResult, FailureClass
from outbox.models import HandoffEvent
from outbox.services import handoff_retry
from reconciliation.metric_totals import MANUAL_INTERVENTIONS
from reconciliation.models import ArchivedTotal
from reconciliation.selectors.health import health_summary, manual_interventions
from tests.builders import record
from tests.migrations import latest, migrate
from tests.outbox.scripted_destination import ScriptedDestination
from tests.reconciliation.health_world import events_of_no_person_and_of_one
from tests.reconciliation.test_metrics import labels, scrape

COUNTER = ("handoff_manual_interventions_total", labels(workflow="onboarding", workspace="7"))


@pytest.mark.django_db(databases=["default", "delivery"])
def test_deleting_a_user_who_acted_keeps_the_interventions_counter(client, world):
    failing = record(3)
    failed = DeliveryResult.failed(FailureClass.TRANSIENT, "http_503", "scripted")
    assert (
        handoff_deliver(handoff_id=failing.pk, destination=ScriptedDestination(failed)) == "pending"
    )
    handoff_retry(handoff_id=failing.pk, actor=world["olga"], reason="receiver is back")
    assert scrape(client)[COUNTER] == 1

    assert health_summary([7])["figures"]["manual_interventions"]["value"] == 1

    world["olga"].delete()
    [retried] = HandoffEvent.objects.filter(handoff=failing, actor_label="olga").exclude(action="")
    assert retried.actor is None
    assert scrape(client)[COUNTER] == 1
    # Health's count and its list keep the deleted person's action (they dropped it before: no archived
    # total there), and the counter reads it from the row, not from a carried total.
    assert health_summary([7])["figures"]["manual_interventions"]["value"] == 1
    assert [(e.pk, e.actor_label) for e in manual_interventions([7])] == [(retried.pk, "olga")]
    assert not ArchivedTotal.objects.filter(metric=MANUAL_INTERVENTIONS).exists()
    assert retried.actor_deleted


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_the_deploy_to_the_persons_rule_keeps_what_the_earlier_rule_counted(client, world):
    events_of_no_person_and_of_one(world)
    # The earlier rule: every event with an action (receiver_event, hold, resume).
    assert HandoffEvent.objects.exclude(action="").count() == 3
    migrate([("reconciliation", "0013_incidents_move_to_their_app")])
    migrate(latest())
    assert scrape(client)[COUNTER] == 3
