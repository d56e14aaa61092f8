"""The smtp kind: one e-mail per handoff (`destination`), sent in one SMTP session (`session`)."""
