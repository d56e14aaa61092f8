"""URLs of incidents: the list, one incident's page, acknowledge and resolve (docs/incidents.md)."""

from django.urls import path

from console.views import incidents as views

app_name = "incidents"

urlpatterns = [
    path("", views.incident_list, name="list"),
    path("<int:pk>/", views.incident_detail, name="detail"),
    path("<int:pk>/acknowledge", views.incident_ack, name="acknowledge"),
    path("<int:pk>/resolve", views.incident_resolve, name="resolve"),
]
