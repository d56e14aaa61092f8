"""The destinations' screens: the list, one destination's page, and the operator's actions on it."""

from django.urls import path

from console.views import destinations as views

app_name = "destinations"

urlpatterns = [
    path("", views.destination_list, name="list"),
    path("<slug:name>/", views.destination_detail, name="detail"),
    path("<slug:name>/pause", views.destination_pause, name="pause"),
    path("<slug:name>/resume", views.destination_resume, name="resume"),
    path("<slug:name>/window", views.destination_window, name="window"),
    path("<slug:name>/test", views.destination_test, name="test"),
]
