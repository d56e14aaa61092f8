"""gunicorn's settings for every process that serves the console or the receiver (gunicorn reads this file
from its working directory).

The access log, plain or JSON, writes a request's URL with every query parameter named like a credential
masked (`/metrics?token=[redacted]`): a token refused in the URL must not be kept in the log.

gunicorn writes a `Server: gunicorn` header on every response and has no setting to leave it out; the
console names no software to whoever asks, so the header is dropped where gunicorn builds it.

gunicorn (25.1 and later) opens a control socket by default, one path per user (`$XDG_RUNTIME_DIR/gunicorn.ctl`
or `~/.gunicorn/gunicorn.ctl`) through which whoever reaches it resizes, reloads or stops the server. Nothing here
uses it, and two servers of one user (the console and the receiver, or a test's beside a bench's) would take the
same path, each unlinking the other's: it is not opened (least privilege; deployments stop and reload by signal).
"""

import os

import gunicorn.glogging
import gunicorn.http.wsgi

from outbox.redaction import redact_query_parameters

_default_headers = gunicorn.http.wsgi.Response.default_headers


def _default_headers_without_server(self):
    return [line for line in _default_headers(self) if not line.lower().startswith("server:")]


gunicorn.http.wsgi.Response.default_headers = _default_headers_without_server


class RedactedAccessLog(gunicorn.glogging.Logger):
    """gunicorn's logger whose access-log atoms (request line, query string, referer, any header) have their
    credential query parameters masked, before either format writes them."""

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for name, value in atoms.items():
            if isinstance(value, str) and "=" in value:
                atoms[name] = redact_query_parameters(value)
        if atoms.get("q"):
            atoms["q"] = redact_query_parameters(f"?{atoms['q']}")[1:]
        return atoms


logger_class = RedactedAccessLog
control_socket_disable = True


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
