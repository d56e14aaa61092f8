"""URLs of incidents: the list, one incident's page, acknowledge and resolve, and replays previewed item by
item (docs/incidents.md). Included under `incidents/` by `console/urls/incidents.py`, which adds the replay
of a handoff list's filter to the same namespace."""

from django.urls import path

from incidents.views import incidents as views
from incidents.views import replays

app_name = "incidents"

urlpatterns = [
    path("", views.incident_list, name="list"),
    path("open-count", views.incident_open_count, name="open_count"),
    path("<int:pk>/", views.incident_detail, name="detail"),
    path("<int:pk>/acknowledge", views.incident_ack, name="acknowledge"),
    path("<int:pk>/resolve", views.incident_resolve, name="resolve"),
    path("<int:pk>/replay", replays.incident_replay_start, name="replay_start"),
    path("replays/<int:pk>/", replays.replay_detail, name="replay"),
    path("replays/<int:pk>/run", replays.replay_run, name="replay_run"),
    path("replays/<int:pk>/items.csv", replays.replay_items_csv, name="replay_csv"),
]
