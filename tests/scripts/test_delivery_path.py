"""One handoff's delivery, read from the dispatcher, stays within the dispatch package, the destination kind's
folder and the outcome services (issue 36, "a layout by subject"). Read from the import graph (grimp, as
import-linter builds it): every module of the outbox that the dispatcher reaches must belong to
one of the places below, each named with why it is on the way. Before the regroup the way went through the
flat `outbox/` and `outbox/services/` (`outbox.services.claims`, `outbox.lease_keeper`, `outbox.recorded` …)
and through destination kinds' modules lying outside any kind's folder (`outbox.destinations.http_answers`,
`outbox.destinations.idempotency_key_http` …): this test names each of them."""

import grimp

ENTRY = "outbox.dispatch.dispatcher"

# The dispatch package: the claim, the lease kept before each call, the outcomes written and counted.
DISPATCH = "outbox.dispatch"

# How a destination is reached: the interface and the registry at the top of outbox/destinations/, and the
# kinds' own modules, each inside its kind's folder (`outbox/destinations/<kind>/`, as healthchecks'
# `hc/integrations/<kind>/`). A kind's module lying loose at the top is a failure.
DESTINATIONS = "outbox.destinations"
DESTINATIONS_TOP = {
    "outbox.destinations",
    "outbox.destinations.base",
    "outbox.destinations.registry",
    "outbox.destinations.lease_rule",
    "outbox.destinations.status_events_config",
    "outbox.destinations.work_status_config",
}

# The outcome services: what an answer means (`failures`), the plan for it (`outcomes`), its fenced record
# (`services.outcomes`, through `services.transitions` and the fields each move sets, `services.moves`, every
# delivered batch in one statement: `delivered`), and what a delivered step records next (`services.workflows`,
# `steps`, the next step's row through `services.recording`).
OUTCOME_SERVICES = {
    "outbox.failures",
    "outbox.outcomes",
    "outbox.delivered",
    "outbox.services.outcomes",
    "outbox.services.transitions",
    "outbox.services.moves",
    "outbox.services.workflows",
    "outbox.services.recording",
    "outbox.steps",
}

# Whether a call may leave now, asked of the destination before each call and told after it: its holds,
# its breaker (a credential hold when refusals persist: in a row, or a share of recent calls) and its
# limits. They are the destination's state, shared with the console and the probes. And whether a claim may be
# taken at all behind a pooler: on a new PostgreSQL timeline, what the promoted replica may have forgotten is
# marked first (`failover`, `services.restore`).
ADMISSION = {
    "outbox.failover",
    "outbox.services.restore",
    "outbox.services.case_holds",
    "outbox.services.breaker",
    "outbox.services.credential_share",
    "outbox.breaker_rules",
    "outbox.services.limits",
    "outbox.services.lookup_limits",
    "outbox.limit_rules",
}

# Leaves every app uses: the models, the database clock, errors, payload hashing, redaction, retry policy,
# signing, a write retried on a fresh connection, many-row statements, a handoff's search text.
LEAVES = {
    "outbox.clock",
    "outbox.page_clock",
    "outbox.errors",
    "outbox.payloads",
    "outbox.redaction",
    "outbox.retry",
    "outbox.signing",
    "outbox.reconnect",
    "outbox.bulk_writes",
    "outbox.search_text",
}

# Imports of the entry that are not one handoff's delivery but its maintenance turn, which sends nothing: the
# settlement pass (its own package, outbox/settlement/, asks the receiver about unknown outcomes) and the
# deadline check (a handoff past its deadline goes to a person).
NOT_DELIVERY = {
    (ENTRY, "outbox.settlement.passes"),
    (ENTRY, "outbox.services.deadlines"),
}


def _within(graph, module: str) -> bool:
    if module == DISPATCH or module.startswith(DISPATCH + "."):
        return True
    if module.startswith(DESTINATIONS + "."):
        # at the top: the shared modules, and a folder's package; below it: a module in a folder
        return (
            module in DESTINATIONS_TOP
            or bool(graph.find_children(module))
            or module.count(".") >= 3
        )
    if module == "outbox.models" or module.startswith("outbox.models."):
        return True
    return module in DESTINATIONS_TOP | OUTCOME_SERVICES | ADMISSION | LEAVES


def outside(entry: str = ENTRY, not_delivery=NOT_DELIVERY) -> dict[str, tuple[str, ...]]:
    """The modules the entry reaches that belong to none of the places above, each with the chain of imports
    that reaches it."""
    graph = grimp.build_graph("outbox", cache_dir=None)
    for importer, imported in not_delivery:
        if {importer, imported} <= graph.modules and graph.direct_import_exists(
            importer=importer, imported=imported
        ):
            graph.remove_import(importer=importer, imported=imported)
    reached = graph.find_upstream_modules(entry)
    return {
        module: graph.find_shortest_chain(importer=entry, imported=module)
        for module in sorted(reached)
        if not _within(graph, module)
    }


def test_one_handoffs_delivery_stays_within_dispatch_its_kinds_folder_and_the_outcome_services():
    stray = outside()
    assert not stray, "the delivery path leaves its places:\n" + "\n".join(
        f"  {module}: {' -> '.join(chain)}" for module, chain in stray.items()
    )


def test_the_entry_is_the_dispatcher_and_reaches_a_kinds_folder():
    graph = grimp.build_graph("outbox", cache_dir=None)
    reached = graph.find_upstream_modules(ENTRY)
    assert "outbox.dispatch.claims" in reached
    assert "outbox.destinations.http.destination" in reached
    assert "outbox.services.outcomes" in reached
