import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
# What start-up loaded (modules, settings, URL patterns, models) lives as long as the process: moved out of
# the collector's reach, so that a full collection scans only what requests made. Otherwise one in about
# forty console pages paid for a full collection of the whole process (tens of ms on a page of 50 rows:
# the 95th percentile of docs/benchmarks.md's console pages).
gc.freeze()
