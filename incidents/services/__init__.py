"""Every write of an incident: opened, kept in step with its cause, resolved (`incidents`); paged,
escalated, told on its channels (`notifications`); a person's acknowledge and resolve (`operator`); a
replay of its handoffs previewed item by item (`replay_preview`) and run (`replay_run`)."""
