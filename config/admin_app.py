"""Django's admin, its ModelAdmins discovered with the URLs instead of at every process's start.

`django.contrib.admin`'s default app config imports every app's `admin.py` in `django.setup()`, and with them
what those import (the erasure action's services, the console's evidence tags, django-q's and django-otp's
admins): about 30 modules that a process serving no admin never uses, such as `manage.py dispatch`, of which
`make test` starts hundreds (docs/testing.md, "The admin discovered with the URLs"). `config/urls.py`
discovers them before it routes `/admin/`, as Django's documentation has it for `SimpleAdminConfig`; the admin
system check discovers them first too, so that `manage.py check` checks every ModelAdmin whether or not the
URL check ran before it."""

from django.contrib.admin import autodiscover
from django.contrib.admin.apps import SimpleAdminConfig
from django.contrib.admin.checks import check_admin_app, check_dependencies
from django.core import checks


def check_discovered_admin(app_configs, **kwargs):
    """Django's check of the admin sites, after every app's `admin.py` is imported."""
    autodiscover()
    return check_admin_app(app_configs, **kwargs)


class AdminDiscoveredWithTheUrls(SimpleAdminConfig):
    def ready(self) -> None:
        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(check_discovered_admin, checks.Tags.admin)
