"""/healthz and /readyz: the probes of an orchestrator (console/views/health_probes.py)."""

from django.urls import path

from console.views import health_probes as views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
]
