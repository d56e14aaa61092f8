from tests.reconciliation.alerts.channel_servers import mailbox

__all__ = ["mailbox"]
