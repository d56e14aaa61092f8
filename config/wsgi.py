import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# The collector is off while start-up builds what the process keeps (as manage.py does: docs/testing.md,
# "Starting a process"): a couple of hundred collections would scan it again and again.
gc.disable()
application = get_wsgi_application()
# The URLconf too, and with it the admin's ModelAdmins (config/admin_app.py): the first request would import them
# with the collector on, and they too live as long as the process.
get_resolver().url_patterns  # noqa: B018 (imports the URLconf)
gc.enable()
# What start-up loaded (modules, settings, URL patterns, models) lives as long as the process: moved out of
# the collector's reach, so that a full collection scans only what requests made. Otherwise one in about
# forty console pages paid for a full collection of the whole process (tens of ms on a page of 50 rows:
# the 95th percentile of docs/benchmarks.md's console pages).
gc.freeze()
