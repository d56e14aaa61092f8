"""The operator CLI (`manage.py handoffs`): the console's handoff screens and actions for a terminal, acting
as a named user whose workspaces and roles are checked as the browser's are, through the same services, so
that every action writes the same events (docs/cli.md)."""
