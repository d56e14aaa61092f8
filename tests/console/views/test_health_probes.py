"""/healthz and /readyz: open probes, nothing secret, no database for /healthz, 503 with a reason."""

import pytest
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder


def test_healthz_answers_without_a_database(client):
    # No django_db mark: any database access here raises.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.django_db(databases=["default", "delivery"])
def test_readyz_is_ready_when_every_database_has_every_migration(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.content == b"ready\n"


@pytest.mark.django_db(databases=["default", "delivery"])
def test_readyz_names_the_database_with_a_migration_not_applied(client):
    MigrationRecorder(connections["delivery"]).record_unapplied("outbox", "0001_initial")
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.content.decode()
    assert "database delivery: 1 migration(s) not applied (first: outbox.0001_initial)" in body
    assert "database default" not in body


def test_probes_take_get_only(client):
    assert client.post("/healthz").status_code == 405
    assert client.get("/healthz", follow=False).status_code == 200


@pytest.mark.django_db(databases=["default", "delivery"])
def test_probes_are_answered_over_plain_http_when_https_is_enforced(client, settings):
    """An orchestrator probes the pod's address over HTTP: a redirect to HTTPS would count as success."""
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/handoffs/").status_code == 301
