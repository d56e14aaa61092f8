"""The dispatch engine: due handoffs claimed, sent to their destination, their outcomes recorded, one handoff
at a time or in batches. `dispatcher`: one batch's way (claim, guard, call, record) and the maintenance turn;
`runner`: the long-running process serving every destination (`serving`: which one next; `wakeups`: hints
to look now; `heartbeat`: proof the loop turns; `held_destinations`: those it cannot serve); `claims` and
`leases`: the claim, its lease renewed, given back or expired; `lease_keeper`: no call leaves after its lease
could have passed on; `recorded`: the outcomes written and counted; `run_stats`: what a batch did. What an
answer means and its fenced record are the outcome services (`outbox/outcomes.py`,
`outbox/services/outcomes.py`, `outbox/delivered.py`); how a destination is reached is `outbox/destinations/`."""
