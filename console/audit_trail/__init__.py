"""The audit trail to hand over: every decision, correction, operator action, repair, role change and
destination change of one workspace and period, as CSV or JSON Lines (docs/audit.md).

The records stay where each app writes them; this package reads them side by side (it sits with the screens,
above every app), and an export is itself recorded (`approvals.AuditExport`)."""
