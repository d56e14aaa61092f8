"""Settings for `manage.py lintmigrations` (django-migration-linter, run by `make lint`): the real settings,
the linter's app, and its rules for a schema that changes while dispatchers run (docs/operations.md,
"Upgrades").

The linter reads the SQL each migration would run on PostgreSQL, the production backend, so both aliases
name a PostgreSQL server (MIGRATION_LINT_DATABASE_URL, by default the local server's `postgres` database
through libpq's defaults and PGHOST). It reads the migration table there and writes nothing. The package's
settings are read before this module, so the process needs HANDOFF_ALLOW_EPHEMERAL_SECRETS=1 or a key, as
the Makefile gives it.

It fails on what breaks a deploy with dispatchers running: an index built or dropped without
CONCURRENTLY (writes to the table wait for the whole build), a NOT NULL column whose default is dropped
after the add (the release before inserts rows without it), a dropped or renamed column or table, a column
altered in place.
"""

import os

import dj_database_url

from config.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "django_migration_linter"]  # noqa: F405

_LINT_DATABASE = dj_database_url.parse(
    os.environ.get("MIGRATION_LINT_DATABASE_URL", "postgres:///postgres")
)
DATABASES = {"default": _LINT_DATABASE, "delivery": dict(_LINT_DATABASE)}
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

# Migrations released before the linter ran, with what it flags and why they stay as they are. They have
# run on every database there is: editing them now would change no schema, only the history. Nothing new
# goes here; a new migration is made safe instead (docs/operations.md, "Upgrades").
_DEFAULT_DROPPED = "NOT NULL column added with a default that Django drops after the add"
_INDEX = "index built without CONCURRENTLY"
RELEASED_MIGRATIONS_IGNORED = {
    ("approvals", "0005_rule_version_steps"): f"{_DEFAULT_DROPPED} (rule versions: a few rows)",
    ("approvals", "0006_request_correction_and_reason_code"): f"{_DEFAULT_DROPPED}; {_INDEX}",
    ("outbox", "0002_handoff_source_indexes"): _INDEX,
    ("outbox", "0004_workflow_steps_compensation"): f"{_DEFAULT_DROPPED}; {_INDEX}",
    ("outbox", "0006_destination_limits"): f"{_DEFAULT_DROPPED}; {_INDEX}",
    ("outbox", "0007_partial_indexes"): f"{_INDEX}; indexes dropped without CONCURRENTLY",
    ("outbox", "0008_references_indexed_where_set"): f"{_INDEX}; indexes dropped likewise",
    ("outbox", "0010_events_attempts_redundant_indexes"): f"{_INDEX}; indexes dropped likewise",
    ("reconciliation", "0002_manual_repair_and_scoped_runs"): f"{_DEFAULT_DROPPED}; {_INDEX}",
    ("reconciliation", "0003_alert_severity_workspace"): _DEFAULT_DROPPED,
    ("reconciliation", "0004_work_outcome_findings"): f"{_DEFAULT_DROPPED}; {_INDEX}",
}

# New migrations the linter flags for a reason it cannot judge, each with why it is safe. A unique
# constraint replaced by a looser one: every row the release before writes satisfies the new one too.
SAFE_MIGRATIONS_IGNORED = {
    ("reconciliation", "0009_incident_workspace"): (
        "one live incident per cause becomes one per cause and workspace (built CONCURRENTLY): the "
        "release before writes incidents of no workspace, unique per cause as they always were"
    ),
    ("reconciliation", "0012_notification_handoff_drop_alertrecord"): (
        "drops reconciliation_alertrecord, out of Django's state since 0010: neither that release nor "
        "this one reads or writes it, and nothing references it"
    ),
    ("outbox", "0031_drop_replaced_hold_columns"): (
        "release two of the holds' columns: drops the seven hold_* and window_* columns of "
        "outbox_destinationhealth, out of Django's state since 0027 (release one): neither that release "
        "nor this one reads or writes them"
    ),
}

MIGRATION_LINTER_OPTIONS = {
    "no_cache": True,
    # The linter ignores by migration name; these names are unique across the apps.
    "ignore_name": sorted(
        name for _app, name in {**RELEASED_MIGRATIONS_IGNORED, **SAFE_MIGRATIONS_IGNORED}
    ),
    # The linter only warns about these; on a hot table a blocking index build is an outage.
    "warnings_as_errors": ["CREATE_INDEX", "CREATE_INDEX_EXCLUSIVE", "DROP_INDEX", "REINDEX"],
}
