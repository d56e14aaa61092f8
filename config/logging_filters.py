"""Log filters."""

import logging


class RefusalsOnOneLine(logging.Filter):
    """Django logs a refused request (403 PermissionDenied, 400 SuspiciousOperation) with the exception's
    whole traceback at WARNING. A refusal is the product working as meant: one line says what and where, and a
    real fault's traceback is not lost among them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if 400 <= (getattr(record, "status_code", None) or 0) < 500:
            record.exc_info = None
            record.exc_text = None
        return True
