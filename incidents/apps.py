from django.apps import AppConfig


class IncidentsConfig(AppConfig):
    name = "incidents"
    label = "incidents"
    verbose_name = "Incidents"
