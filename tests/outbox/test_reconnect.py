"""An outcome write whose database connection is cut between the destination's answer and the write is
retried on a fresh connection under the same fencing token: the handoff is delivered at once, not left in
flight for its lease to run out and settlement to ask again (PostgreSQL: the connection really terminated)."""

import psycopg
import pytest
from django.db import connections

from outbox.dispatch.dispatcher import dispatch_batch
from outbox.models import Attempt, HandoffState
from tests.builders import record
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState


class CutAfterAnswer(ScriptedDestination):
    """Delivers to the real receiver, then terminates the dispatcher's database connection before the
    outcome can be written (from a connection of its own, as an operator or a failover would)."""

    def deliver(self, outgoing):
        result = super().deliver(outgoing)
        victim = connections["default"].connection.info.backend_pid
        params = connections["default"].get_connection_params()
        keep = {k: v for k, v in params.items() if k in {"dbname", "host", "port", "user"}}
        with psycopg.connect(**keep, autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", [victim])
        self.cut = getattr(self, "cut", 0) + 1
        return result


def test_an_outcome_write_that_loses_its_connection_is_retried_and_the_handoff_delivered():
    if connections["default"].vendor != "postgresql":
        pytest.fail("needs PostgreSQL: run with DATABASE_URL set")
    handoff = record(1)
    destination = CutAfterAnswer()

    stats = dispatch_batch(destination=destination, worker="w1")

    assert destination.cut == 1
    handoff.refresh_from_db()
    assert (handoff.state, stats.delivered) == (S.DELIVERED, 1)
    assert handoff.destination_id
    assert Attempt.objects.filter(handoff=handoff).count() == 1
