"""An alert's times of record are the database's, whatever the clock of the host that sends it: `sent_at` is
the statement's time, and the sweep's "now" (which SLA breaches it records) is read from the database."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from outbox.clock import db_time
from reconciliation.alerts.sending import alerts_send_due
from reconciliation.models import AlertKind, AlertRecord
from tests.reconciliation.alerts.test_sending import rejected

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.mark.parametrize("hours", [1, -1], ids=["host an hour ahead", "host an hour behind"])
def test_an_alert_sent_from_a_skewed_host_is_stamped_with_the_database_clock(
    world, settings, monkeypatch, hours
):
    settings.ALERT_EMAILS = ["oncall@example.com"]
    settings.ALERT_WEBHOOK_URL = ""
    rejected(42)
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(hours=hours))
    before = db_time()
    assert alerts_send_due().messages_sent == 1 and len(mail.outbox) == 1
    after = db_time()
    [sent_at] = AlertRecord.objects.values_list("sent_at", flat=True)
    assert before <= sent_at <= after, (before, sent_at, after)


def test_an_sla_breach_is_recorded_by_the_database_clock_not_an_hour_early(
    world, settings, monkeypatch
):
    settings.ALERT_EMAILS = ["oncall@example.com"]
    settings.ALERT_WEBHOOK_URL = ""
    handoff = rejected(42)
    # Due in 30 minutes by the database's clock: a host an hour ahead must not call it breached.
    type(handoff).objects.filter(pk=handoff.pk).update(sla_due_at=db_time() + timedelta(minutes=30))
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(hours=1))
    recorded = alerts_send_due().recorded
    assert recorded[AlertKind.SLA_BREACH] == 0, recorded
