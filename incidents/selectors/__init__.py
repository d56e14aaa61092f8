"""Reads the incident screens and Health share: incidents in view (`incidents`), replays (`replays`)."""
