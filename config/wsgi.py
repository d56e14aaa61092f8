import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# The collector is off while start-up builds what the process keeps (as manage.py does: docs/testing.md,
# "Starting a process"): a couple of hundred collections would scan it again and again.
gc.disable()
application = get_wsgi_application()
gc.enable()
# What start-up loaded (modules, settings, URL patterns, models) lives as long as the process: moved out of
# the collector's reach, so that a full collection scans only what requests made. Otherwise one in about
# forty console pages paid for a full collection of the whole process (tens of ms on a page of 50 rows:
# the 95th percentile of docs/benchmarks.md's console pages).
gc.freeze()
