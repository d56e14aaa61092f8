"""A lookup its OAuth2 token endpoint refused (no token: the API was not called) is read as not asked, by the
refusal's flag (`LookupFailed.asked`), in every place that settles or previews, as a lookup its limits or a
hold refused: a person's reconcile says "not asked", the dispatchers' settlement records nothing and asks
again at its next pass, a replay preview's item says "not asked: <what refused it>". Against the token server
and the API, each a process of its own (`oauth2_servers`). Both backends."""

import pytest
from django.test import Client

from incidents.models import ReplayItem, ReplayVerdict
from incidents.services.replay_preview import replay_preview_run, replay_start
from outbox.destinations.registry import destination_from_config
from outbox.dispatch.dispatcher import settle_uncertain
from outbox.models import DestinationConfig, Handoff, HandoffEvent, HandoffState
from outbox.settlement.asked import handoff_settle
from tests.factories import HandoffFactory, onboarding_world
from tests.outbox.destinations.test_oauth2_credentials import (  # noqa: F401 (fixtures)
    config,
    oauth2_auth,
    servers,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
LOOKUP = {"path": "/v1/records/{key}", "id": "record.id", "key": "record.key"}
# The token server's words for its 503 (no Retry-After: no hold, so nothing but the token endpoint refuses).
REFUSED = "answered HTTP 503"


def crm_config(servers) -> dict:  # noqa: F811
    token_server, api = servers
    token_server.faults(down=503)
    return {**config(api, oauth2_auth(token_server)), "lookup": LOOKUP, "replays_same_key": False}


@pytest.fixture
def crm(servers):  # noqa: F811
    destination = destination_from_config(crm_config(servers))
    yield destination
    destination.close()


def operator(olga) -> Client:
    client = Client()
    client.force_login(olga)
    return client


def test_a_persons_reconcile_says_the_receiver_was_not_asked(servers, crm):  # noqa: F811
    handoff = HandoffFactory(destination="crm", state=S.UNCERTAIN)
    olga = onboarding_world()["olga"]
    assert handoff_settle(handoff_id=handoff.pk, destination=crm, actor=olga) == S.UNCERTAIN

    event = HandoffEvent.objects.filter(handoff=handoff).latest("pk")
    assert event.reason.startswith("reconcile could not ask the receiver: not asked: ")
    assert REFUSED in event.reason
    page = operator(olga).get(f"/handoffs/{handoff.pk}/").content.decode()
    assert "reconcile could not ask the receiver: not asked: " in page
    assert servers[1].state()["requests"] == []


def test_the_dispatchers_settlement_records_nothing_and_asks_again_next_pass(servers, crm):  # noqa: F811
    handoff = HandoffFactory(destination="crm", state=S.UNCERTAIN)
    events = HandoffEvent.objects.filter(handoff=handoff).count()

    # As a pass its limits refuse: nothing learnt, nothing recorded, the claim given back.
    assert settle_uncertain(destination=crm) == {}
    assert HandoffEvent.objects.filter(handoff=handoff).count() == events
    assert Handoff.objects.get(pk=handoff.pk).state == S.UNCERTAIN
    assert servers[1].state()["requests"] == []
    # Its next pass asks again (the handoff was given back, not left leased).
    token_requests = len(servers[0].state()["requests"])
    settle_uncertain(destination=crm)
    assert len(servers[0].state()["requests"]) > token_requests


def test_a_replay_preview_says_not_asked_and_what_refused_it(servers):  # noqa: F811
    whole = crm_config(servers)
    DestinationConfig.objects.create(
        name="crm",
        kind=whole["kind"],
        config={k: v for k, v in whole.items() if k not in ("kind", "name")},
    )
    handoff = HandoffFactory(destination="crm", state=S.NEEDS_ATTENTION, failure_class="transient")
    world = onboarding_world()
    replay = replay_start(
        handoffs=Handoff.objects.filter(pk=handoff.pk), workspace_ids=[7], actor=world["olga"]
    )
    replay_preview_run(replay_id=replay.pk)

    item = ReplayItem.objects.get(replay=replay)
    assert item.verdict == ReplayVerdict.CANNOT_ASK
    assert item.note.startswith("not asked: ")
    assert REFUSED in item.note
    assert "did not answer" not in item.note
    page = operator(world["olga"]).get(f"/incidents/replays/{replay.pk}/").content.decode()
    assert "not asked: " in page
    assert servers[1].state()["requests"] == []
