"""Logging: plain text lines by default (`make run`), JSON lines with LOG_FORMAT=json for a log shipper.

Both go to stderr through one handler whose filters add what the line is about (handoff id, action key,
destination, workspace, trace id: `config/log_fields.py`) and redact the message as screens are redacted.
A JSON line carries those fields by name; a plain line keeps Django's familiar shape.
"""

import logging
import os

from django.core.exceptions import ImproperlyConfigured

LOG_FORMATS = ("plain", "json")
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain").strip().lower() or "plain"
if LOG_FORMAT not in LOG_FORMATS:
    raise ImproperlyConfigured(
        f"LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, not {LOG_FORMAT!r}"
    )

if LOG_FORMAT == "json":
    # Python's warnings (a missing static directory, a deprecation) are written by the warnings module
    # straight to stderr as plain text; captured, they are records of the logger `py.warnings`, and so JSON
    # lines like every other (seen as a plain line among gunicorn's JSON ones).
    logging.captureWarnings(True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "config.log_fields.PlainLines",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "json": {
            "()": "config.log_fields.JsonLines",
            "format": "%(levelname)s %(name)s %(message)s",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",
        },
    },
    "filters": {
        "refusals_on_one_line": {"()": "config.logging_filters.RefusalsOnOneLine"},
        "context_fields": {"()": "config.log_fields.ContextFields"},
        "redacted_message": {"()": "config.log_fields.RedactedMessage"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context_fields", "redacted_message"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own handlers of `django` (a console one under DEBUG, and e-mail of errors to ADMINS) are
        # replaced by none: its records reach the root's one handler, the only destination the log inventory
        # lists for them (docs/observability.md, "Log inventory").
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.db.backends": {"level": "WARNING"},
        "django.request": {"filters": ["refusals_on_one_line"]},
        "django.security": {"filters": ["refusals_on_one_line"]},
    },
}
