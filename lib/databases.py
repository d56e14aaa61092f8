"""The database alias of the source application's rows (approvals, the outbox, reconciliation).

Named once: every service passes it to `transaction.atomic(using=DB)` and `.using(DB)`, so that a write
never lands on the receiver's database by the router's guess. The receiver (`delivery/`) names its own.
"""

DB = "default"
