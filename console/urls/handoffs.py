from django.urls import path

from console.views import handoffs as views

app_name = "outbox"

urlpatterns = [
    path("", views.handoff_list, name="list"),
    path("bulk", views.handoff_bulk, name="bulk"),
    path("bulk/<int:pk>/", views.bulk_job_progress, name="bulk_job"),
    path("<int:pk>/", views.handoff_detail, name="detail"),
    path("<int:pk>/retry", views.handoff_retry, name="retry"),
    path("<int:pk>/reconcile", views.handoff_reconcile, name="reconcile"),
    path("<int:pk>/correct", views.handoff_correct, name="correct"),
    path("<int:pk>/cancel", views.handoff_cancel, name="cancel"),
    path("<int:pk>/assign", views.handoff_assign, name="assign"),
    path("<int:pk>/acknowledge", views.handoff_acknowledge, name="acknowledge"),
    path("<int:pk>/reconcile-now", views.handoff_reconcile_now, name="reconcile_now"),
    path("<int:pk>/repair", views.handoff_repair, name="repair"),
    path("<int:pk>/compensate", views.handoff_compensate, name="compensate"),
]
