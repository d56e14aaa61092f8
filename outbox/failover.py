"""A failover noticed by the product itself: every new connection to the source database reads PostgreSQL's
timeline, and the first one to meet a new timeline (a replica promoted) marks what the new primary may have
forgotten before anything is claimed on it.

Replication is asynchronous in most deployments: the old primary may have claimed a handoff, sent it and
recorded the delivery, and crashed before its replica received those commits. On the promoted replica the
handoff is pending again; a dispatcher that sent it now would make a second call for an effect the destination
may hold. Every connection is new after a failover (the old server is gone), so checking on connect covers
every process: dispatchers, the django-q2 cluster, the web app. `handoffs_mark_after_failover` does the rest
(`outbox/services/restore.py`); settlement then asks each destination about each marked key, as after a
restore. docs/operations.md, "Failover".
"""

from django.db import ProgrammingError
from django.db.backends.signals import connection_created

from lib.databases import DB
from outbox.services.restore import handoffs_mark_after_failover

# The current timeline: the first 8 hex digits of the WAL segment name (functions any role may call); none on a
# standby. With the one recorded last, in one statement: the usual case (the same) costs one read.
TIMELINES_SQL = (
    "SELECT CASE WHEN pg_is_in_recovery() THEN NULL "
    "ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END, "
    "(SELECT timeline FROM outbox_databasetimeline WHERE id = 1)"
)


def timeline_check_on_connect(sender, connection, **kwargs) -> None:
    if connection.alias != DB or connection.vendor != "postgresql":
        return
    timeline_check(connection)


def timeline_check(connection) -> None:
    """Mark what a new timeline's primary may have forgotten, if the timeline is new (one SELECT otherwise).
    On connect, and before each claim behind a pooler (`HANDOFF_TIMELINE_CHECK_EACH_CLAIM`), where a
    process's connection outlives the failover: the pooler changes the server behind it, nothing is new."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(TIMELINES_SQL)
            timeline, seen = cursor.fetchone()
        # None: a standby, where nothing is claimed; equal: no failover since it was recorded.
        if timeline is not None and timeline != seen:
            handoffs_mark_after_failover(timeline=timeline)
    except ProgrammingError:
        # The table is not there yet: `migrate` connects before it creates it.
        if connection.in_atomic_block:
            raise


def connect_timeline_check() -> None:
    connection_created.connect(timeline_check_on_connect, dispatch_uid="outbox.failover")
