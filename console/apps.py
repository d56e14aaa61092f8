from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The screens that combine the apps: views, urls, filters, forms, template tags, the admin of handoffs."""

    name = "console"
    verbose_name = "Operator console"
