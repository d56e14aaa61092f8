"""Incidents: the one way a person is told (docs/incidents.md).

Failures grouped by cause (`causes`) into one incident each (`incidents`), told after the delay of their
severity and only while their cause holds, paged once and escalated until acknowledged (`notifications`),
through per-workspace channels (`channels`), each notification a row with a stable id and a handoff to its
channel's destination, delivered by the outbox's engine (`channel_delivery`); the sweep (`sweep`) runs them.
"""

from reconciliation.alerts.sweep import SweepResult, alerts_send_due

__all__ = ["SweepResult", "alerts_send_due"]
