"""URLs of the signed trigger intake (POST /approvals/api/triggers) and of its console screen."""

from django.urls import path

from approvals import api
from console.views import triggers as intake_views

app_name = "intake"

urlpatterns = [
    path("triggers", api.triggers, name="receive"),
    # The console screen of triggers received (GET, signed-in users, scoped to their workspaces).
    path("triggers/", intake_views.triggers, name="triggers"),
    path("triggers/<int:pk>/", intake_views.trigger_detail, name="trigger_detail"),
]
