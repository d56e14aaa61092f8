"""Alerts an on-call person can act on, sent by a periodic sweep.

The sweep looks for alertable episodes (`episodes`: a handoff entered needs_attention, a handoff
passed its SLA, a reconciliation finding opened, a destination paused or many handoffs failing —
`pages`), records each once under a unique group key, then sends what is unsent (`sending`): one
message per (kind, workflow, failure class) (`messages`), listing each handoff with the workflow,
the instance (action key), the workflow's last delivered step, the failure class, the affected record,
the safest next action and a link (`items`). An episode that persists is not sent again; a handoff that
fails again later is a new episode. Everything shown goes through the redaction function.

Then incidents (docs/incidents.md): failures grouped by cause (`causes`) into one incident each
(`incidents`), paged once and escalated until acknowledged (`notifications`), through per-workspace
channels (`channels`), each notification a row with a stable id sent and retried like a handoff
(`delivering`).
"""

from reconciliation.alerts.items import AlertItem
from reconciliation.alerts.sending import SweepResult, alerts_send_due, send_group

__all__ = ["AlertItem", "SweepResult", "alerts_send_due", "send_group"]
