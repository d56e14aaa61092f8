"""The requests' screens: the approvals queue, a revision's page and decision, and changes to a request."""

from django.urls import path

from console.views import approval_links, delegations, request_detail, requests
from console.views import request_changes as changes

app_name = "approvals"

urlpatterns = [
    path("", requests.queue, name="queue"),
    path("roles/", requests.role_changes, name="role_changes"),
    path("new/", requests.request_new, name="new"),
    path("mine/", requests.my_requests, name="mine"),
    path("search/", requests.search, name="search"),
    path("link/<str:token>/", approval_links.open_link, name="link"),
    path("delegations/", delegations.my_delegations, name="delegations"),
    path("delegations/new", delegations.delegation_new, name="delegation_new"),
    path("delegations/end", delegations.delegation_end, name="delegation_end"),
    path("<int:workspace_id>/<int:number>/revise/", changes.request_revise, name="revise"),
    path("<int:workspace_id>/<int:number>/<int:revision>/", request_detail.detail, name="detail"),
    path(
        "<int:workspace_id>/<int:number>/<int:revision>/decide",
        request_detail.decide,
        name="decide",
    ),
    path(
        "<int:workspace_id>/<int:number>/<int:revision>/correct",
        changes.request_correct,
        name="correct",
    ),
    path("<int:workspace_id>/<int:number>/cancel", changes.request_cancel, name="cancel"),
]
