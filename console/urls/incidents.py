"""URLs under `incidents/`: the incidents app's own (`incidents/urls.py`), and the replay of the handoff
list's filter, a console screen that joins the two, in the same namespace (docs/incidents.md)."""

from django.urls import path

from console.views import incident_replays
from incidents import urls as incident_urls

app_name = incident_urls.app_name

urlpatterns = [
    *incident_urls.urlpatterns,
    path(
        "replays/from-filter",
        incident_replays.filter_replay_start,
        name="replay_from_filter",
    ),
]
