"""bench/console_ceiling.py is what gunicorn imports in bench/console_operators_bench.py: when config.wsgi
resolved the URLconf at start-up (79f01a7, reverted since), the ceiling's module, set as ROOT_URLCONF before it,
was read half imported and every worker failed to boot ("does not appear to have any patterns"). Imported as
gunicorn does, in a process of its own, it serves the product's patterns and then the ceiling's page."""

import os
import subprocess
import sys

from bench.harness import ROOT

PROBE = """
import bench.console_ceiling
from django.conf import settings
from django.urls import resolve
print(resolve("/bench/ceiling/", urlconf=settings.ROOT_URLCONF).func.__name__)
print(resolve("/handoffs/", urlconf=settings.ROOT_URLCONF).url_name)
"""


def test_the_ceiling_module_imports_as_gunicorn_imports_it_and_serves_both():
    env = {**os.environ, "DJANGO_DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ceiling", "list"]
