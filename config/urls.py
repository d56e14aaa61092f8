from django.contrib import admin
from django.urls import include, path

from console.views import requests as request_views

urlpatterns = [
    path("", request_views.home, name="home"),
    # Sign-in and sign-out, password or single sign-on (console/views/sign_in.py).
    path("accounts/", include("console.urls.sign_in")),
    path("admin/", admin.site.urls),
    path("approvals/api/", include("console.urls.intake")),
    path("approvals/", include("console.urls.requests")),
    path("handoffs/", include("console.urls.handoffs")),
    path("destinations/", include("console.urls.destinations")),
    path("audit/", include("console.urls.audit")),
    path("incidents/", include("console.urls.incidents")),
    # Observation mode: agreement with the current process, going live (docs/observation.md).
    path("observation/", include("console.urls.observation")),
    path("delivery/", include("delivery.urls")),
    # /healthz and /readyz for orchestrators: open, nothing secret (docs/operations.md).
    path("", include("console.urls.health_probes")),
    # Reconciliation runs and findings, the health dashboard and /metrics.
    path("", include("console.urls.reconciliation")),
]
