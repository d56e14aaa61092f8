"""Settlement: an outcome nobody knows (a call whose answer was lost, an expired lease) is settled by asking the
receiver about its action key, never by sending again. `passes`: the dispatcher's settlement pass over one
destination's uncertain handoffs; `claims`: those handoffs leased to one settler and the answers recorded;
`found`: the answers that found the task, settled in one statement on PostgreSQL; `asked`: one outcome a person
asks about (a reconcile)."""
