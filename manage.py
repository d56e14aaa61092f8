#!/usr/bin/env python
import gc
import os
import sys

from django.core.management import ManagementUtility


class StartedUncollected(ManagementUtility):
    """Django's command line with the cyclic garbage collector off while the process starts: `django.setup()`
    and loading the command make the objects the process keeps until it exits (modules, models, settings, URL
    patterns), and about 250 collections scanned them again and again, 0.13 s of a dispatcher's 0.78 s of CPU
    to start (docs/testing.md, "Starting a process"). Once the command is loaded the collector is back on and
    what start-up made is frozen out of its reach, as config/wsgi.py does for the web processes."""

    def fetch_command(self, subcommand):
        command = super().fetch_command(subcommand)
        gc.enable()
        gc.freeze()
        return command


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    gc.disable()
    StartedUncollected(sys.argv).execute()


if __name__ == "__main__":
    main()
