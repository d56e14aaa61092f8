"""gunicorn's settings for every process that serves the console or the receiver (gunicorn reads this file
from its working directory).

gunicorn writes a `Server: gunicorn` header on every response and has no setting to leave it out; the
console names no software to whoever asks, so the header is dropped where gunicorn builds it.
"""

import os

import gunicorn.http.wsgi

_default_headers = gunicorn.http.wsgi.Response.default_headers


def _default_headers_without_server(self):
    return [line for line in _default_headers(self) if not line.lower().startswith("server:")]


gunicorn.http.wsgi.Response.default_headers = _default_headers_without_server


def _json_logging() -> dict:
    """gunicorn's own lines (its master's and workers' start, stop and errors; the access log when one is
    asked for) as JSON lines too, through the app's formatter and redaction (`config/settings/logging.py`),
    so that a log shipper reading LOG_FORMAT=json gets no plain line from the same process."""
    json_handler = {
        "class": "logging.StreamHandler",
        "formatter": "json",
        "filters": ["redacted_message"],
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {
                "()": "config.log_fields.JsonLines",
                "format": "%(levelname)s %(name)s %(message)s",
                "rename_fields": {"levelname": "level", "name": "logger"},
                "timestamp": "time",
            }
        },
        "filters": {"redacted_message": {"()": "config.log_fields.RedactedMessage"}},
        "handlers": {
            "error": {**json_handler, "stream": "ext://sys.stderr"},
            "access": {**json_handler, "stream": "ext://sys.stdout"},
        },
        # gunicorn merges this over its defaults key by key: its root logger's "console" handler is gone.
        "root": {"level": "INFO", "handlers": []},
        "loggers": {
            "gunicorn.error": {"handlers": ["error"], "level": "INFO", "propagate": False},
            "gunicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }


if os.environ.get("LOG_FORMAT", "plain").strip().lower() == "json":
    # The redaction filter reads the settings' secrets before gunicorn has loaded the app: the same default
    # settings module `config/wsgi.py` names.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    logconfig_dict = _json_logging()
