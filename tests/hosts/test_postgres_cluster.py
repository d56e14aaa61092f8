"""The harness's PostgreSQL pair: what the primary committed after replication was cut is not on the promoted
replica, and one connection string naming both servers reaches whichever accepts writes."""

import tempfile
from pathlib import Path

import dj_database_url
import psycopg
import pytest
from django.conf import settings

from tests.hosts.postgres_cluster import multi_host_url, primary_with_replica

pytestmark = [pytest.mark.postgres, pytest.mark.faults, pytest.mark.hosts]


def writable_host(url: str) -> str:
    options = dj_database_url.parse(url)["OPTIONS"]
    with psycopg.connect(dbname="postgres", autocommit=True, connect_timeout=10, **options) as conn:
        return conn.info.host


def test_promoted_replica_lacks_what_was_not_shipped_and_the_url_follows_it():
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="pg-", dir=settings.VAR_DIR))
    with primary_with_replica(root) as (primary, replica):
        url = multi_host_url([primary, replica], "postgres")
        primary.sql("CREATE TABLE shipped (n int)")
        primary.sql("INSERT INTO shipped VALUES (1)")
        primary.wait_replayed_by(replica)
        primary.cut_replication()
        primary.sql("INSERT INTO shipped VALUES (2)")
        assert writable_host(url) == str(primary.sockets)

        primary.stop("immediate")
        replica.promote()

        assert writable_host(url) == str(replica.sockets)
        assert replica.sql("SELECT n FROM shipped ORDER BY n") == [(1,)]
    assert not root.exists()
