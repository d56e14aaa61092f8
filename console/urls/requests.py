from django.urls import path

from console.views import requests as views

app_name = "approvals"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("roles/", views.role_changes, name="role_changes"),
    path("new/", views.request_new, name="new"),
    path("mine/", views.my_requests, name="mine"),
    path("<int:workspace_id>/<int:number>/revise/", views.request_revise, name="revise"),
    path("<int:workspace_id>/<int:number>/<int:revision>/", views.detail, name="detail"),
    path("<int:workspace_id>/<int:number>/<int:revision>/decide", views.decide, name="decide"),
    path(
        "<int:workspace_id>/<int:number>/<int:revision>/correct",
        views.request_correct,
        name="correct",
    ),
    path("<int:workspace_id>/<int:number>/cancel", views.request_cancel, name="cancel"),
]
