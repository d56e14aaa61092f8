"""The incident screens: the list, one incident's page, acknowledge and resolve (`incidents`), and replays
of an incident's handoffs (`replays`)."""
