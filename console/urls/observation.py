"""Observation mode that compares: agreement per rule version, recording outcomes, going live."""

from django.urls import path

from console.views import observation as views

app_name = "observation"

urlpatterns = [
    path("", views.index, name="index"),
    path("<int:workspace_id>/versions/<str:rule_version>/", views.agreement_page, name="agreement"),
    path(
        "<int:workspace_id>/versions/<str:rule_version>/import",
        views.import_outcomes,
        name="import",
    ),
    path("<int:workspace_id>/cases/<str:key>/record", views.record, name="record"),
    path("<int:workspace_id>/outcomes/<int:outcome_id>/explain", views.explain, name="explain"),
    path("workflows/<str:workflow>/go-live", views.go_live, name="go_live"),
]
