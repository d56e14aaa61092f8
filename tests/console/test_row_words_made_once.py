"""A list row's words made once, not per row (issue 40: 20 operators queue on the list pages' CPU): a row's age
("2 hours, 5 minutes") and retry time ("retry in 3 minutes") ask translation for each unit's words once per
language and number, and its state and failure class read their field's choices once. The words stay Django's,
in the active language."""

from datetime import timedelta

import pytest
from django.db.models.fields import Field
from django.utils import timezone, translation
from django.utils.timesince import timesince, timeuntil

from console.evidence_words import choice_words
from console.templatetags.handoff_rows import _timesince, _timeuntil
from outbox.models import FailureClass, Handoff, HandoffState
from tests.console.clients import client_for
from tests.factories import HandoffFactory

S = HandoffState

# Ages of every shape timesince draws: none, minutes, hours, days, weeks, months, years, and one unit alone.
AGES = [
    timedelta(seconds=s)
    for s in (
        0,
        30,
        60,
        61,
        3599,
        3600,
        3660,
        7322,
        86_399,
        86_400,
        90_061,
        6 * 86_400 + 3600,
        7 * 86_400,
        15 * 86_400 + 7200,
        40 * 86_400,
        400 * 86_400,
        800 * 86_400 + 5 * 3600,
    )
]


@pytest.mark.parametrize("language", ["en-us", "de", "en-us"])
def test_a_rows_age_and_retry_time_are_djangos_in_the_active_language(language):
    now = timezone.now()
    with translation.override(language):
        for age in AGES:
            moment = now - age
            assert _timesince(moment) == timesince(moment), age
            later = now + age + timedelta(seconds=30)
            assert _timeuntil(later) == timeuntil(later), age
    with translation.override("de"):
        assert _timesince(now - timedelta(hours=2, minutes=5)).startswith("2\xa0Stunden")


@pytest.mark.django_db
def test_a_rows_state_and_failure_words_are_the_fields_choices():
    for state in S:
        h = HandoffFactory.build(state=state, failure_class=FailureClass.TRANSIENT)
        assert choice_words(h, "state") == h.get_state_display()
        assert choice_words(h, "failure_class") == h.get_failure_class_display()
    unknown = Handoff(state="not_a_state", failure_class="")
    assert choice_words(unknown, "state") == unknown.get_state_display() == "not_a_state"


@pytest.mark.django_db(databases=["default", "delivery"])
def test_a_list_of_fifty_rows_makes_their_words_once_not_per_row(world, monkeypatch):
    client = client_for(world["olga"])
    for n in range(50):
        HandoffFactory(
            state=S.NEEDS_ATTENTION,
            failure_class=FailureClass.TRANSIENT,
            attempts=3,
            created_at=timezone.now() - timedelta(hours=n % 5, minutes=7),
        )
    # Warm: the session, the templates, the words.
    assert client.get("/handoffs/").status_code == 200
    asked = {"ngettext": 0, "flatchoices": 0}
    ngettext = translation._trans.ngettext
    flatchoices = Field.flatchoices

    def counting_ngettext(*args):
        asked["ngettext"] += 1
        return ngettext(*args)

    def counting_flatchoices(field):
        asked["flatchoices"] += 1
        return flatchoices.fget(field)

    monkeypatch.setattr(translation._trans, "ngettext", counting_ngettext)
    monkeypatch.setattr(Field, "flatchoices", property(counting_flatchoices))
    page = client.get("/handoffs/")
    assert page.status_code == 200
    assert page.content.count(b'data-label="Pending age">') == 50
    # Before: two units' words a row through translation, and two fields' choices flattened a row.
    assert asked["ngettext"] < 10, asked
    assert asked["flatchoices"] < 10, asked
