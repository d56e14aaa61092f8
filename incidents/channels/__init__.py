"""Alert channels: what each kind of channel receives (`payloads`), and each channel a destination of the
outbox's engine, each notification a handoff to it (`delivery`)."""
