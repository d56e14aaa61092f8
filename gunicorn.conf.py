"""gunicorn's settings for every process that serves the console or the receiver (gunicorn reads this file
from its working directory).

gunicorn writes a `Server: gunicorn` header on every response and has no setting to leave it out; the
console names no software to whoever asks, so the header is dropped where gunicorn builds it.
"""

import gunicorn.http.wsgi

_default_headers = gunicorn.http.wsgi.Response.default_headers


def _default_headers_without_server(self):
    return [line for line in _default_headers(self) if not line.lower().startswith("server:")]


gunicorn.http.wsgi.Response.default_headers = _default_headers_without_server
