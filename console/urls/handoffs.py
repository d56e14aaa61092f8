"""The handoff screens: the list and its bulk actions, one handoff's page, and the operators' actions."""

from django.urls import path

from console.views import archived, handoff_list, handoffs
from console.views import handoff_actions as actions
from console.views import handoff_bulk as bulk

app_name = "outbox"

urlpatterns = [
    path("", handoff_list.handoff_list, name="list"),
    path("bulk", bulk.handoff_bulk, name="bulk"),
    path("bulk/<int:pk>/", bulk.bulk_job_progress, name="bulk_job"),
    path("<int:pk>/", handoffs.handoff_detail, name="detail"),
    path("archived/<int:pk>/", archived.archived_detail, name="archived"),
    path("<int:pk>/retry", actions.handoff_retry, name="retry"),
    path("<int:pk>/reconcile", actions.handoff_reconcile, name="reconcile"),
    path("<int:pk>/correct", actions.handoff_correct, name="correct"),
    path("<int:pk>/cancel", actions.handoff_cancel, name="cancel"),
    path("<int:pk>/assign", actions.handoff_assign, name="assign"),
    path("<int:pk>/acknowledge", actions.handoff_acknowledge, name="acknowledge"),
    path("<int:pk>/reconcile-now", actions.handoff_reconcile_now, name="reconcile_now"),
    path("<int:pk>/repair", actions.handoff_repair, name="repair"),
    path("<int:pk>/compensate", actions.handoff_compensate, name="compensate"),
    path("<int:pk>/hold", actions.handoff_hold, name="hold"),
    path("<int:pk>/resume", actions.handoff_resume, name="resume"),
]
