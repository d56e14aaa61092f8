"""URLs of reconciliation, the health dashboard and /metrics (included at the site root)."""

from django.urls import path

from console.views import health as views
from reconciliation import api

app_name = "reconciliation"

urlpatterns = [
    # A destination's signed status events about its tasks (docs/reconciliation.md, "Status events").
    path(
        "reconciliation/api/destinations/<slug:name>/status-events",
        api.status_events,
        name="status_events",
    ),
    path("health/", views.health, name="health"),
    path("health/<slug:figure>/", views.drilldown, name="drilldown"),
    path(
        "health/destinations/<slug:name>/limits",
        views.destination_limits,
        name="destination_limits",
    ),
    path("reconciliation/findings/", views.findings, name="findings"),
    path(
        "reconciliation/findings/<int:pk>/acknowledge",
        views.finding_acknowledge,
        name="finding_acknowledge",
    ),
    path("reconciliation/findings/<int:pk>/resolve", views.finding_resolve, name="finding_resolve"),
    path("reconciliation/runs/", views.runs, name="runs"),
    path("reconciliation/runs/workspace", views.workspace_reconcile, name="workspace_reconcile"),
    path("reconciliation/runs/<int:pk>/", views.run_detail, name="run"),
    path("metrics", views.metrics_view, name="metrics"),
]
