"""An erasure's part on the incidents side (docs/security.md, "Erasure"): an incident's evidence quotes the
latest failure's answer (`incidents/causes.py`), with e-mail addresses masked but a name or a business id
as the receiver wrote it; its title and its events' notes are said from it. The subject's values are
replaced there as in the handoffs' last errors, in the erasure's workspace, inside the erasure's
transaction. Every incident of the workspace is read (an erasure is rare, and a database's case-blind
match is not the eraser's: SQLite's LIKE folds ASCII only). Registered from `IncidentsConfig.ready`
(`erasure_part_register`)."""

from incidents.models import Incident, IncidentEvent
from lib.databases import DB
from outbox.models import Erasure
from outbox.services.erasure import Eraser, text_fields_erase

# The widths the columns take (None: a text column).
INCIDENT_TEXT = {"title": 300, "evidence_first": None, "evidence_last": None}


def incidents_erase(erasure: Erasure, eraser: Eraser) -> None:
    incidents = Incident.objects.using(DB).filter(workspace_id=erasure.workspace_id)
    text_fields_erase(incidents, eraser, INCIDENT_TEXT)
    events = IncidentEvent.objects.using(DB).filter(incident__workspace_id=erasure.workspace_id)
    text_fields_erase(events, eraser, {"note": None})
