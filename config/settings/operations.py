"""Settings for running the product under an orchestrator (docs/operations.md).

The probes are answered over plain HTTP on the pod's own address: an HTTPS redirect would answer them
with a 301, which an orchestrator counts as success whatever the state, so they are exempt from it.
"""

from config.env import env_float, env_int

# The machines' endpoints (the signed APIs, the bundled services' APIs, /metrics) are refused with 403 over
# plain HTTP instead of redirected, since a redirected request has already sent its body and credentials
# (config/https_only.py).
HTTPS_ONLY_PATHS = [
    r"^delivery/api/",
    r"^delivery/accounts/",
    r"^approvals/api/triggers$",
    r"^reconciliation/api/",
    r"^metrics$",
]
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", *HTTPS_ONLY_PATHS]

# The health dashboard's figures are computed once per HEALTH_FIGURES_SECONDS for everyone who looks at the
# same workspaces (per process: the local-memory cache), and the page says how old they are. At 10,000,000
# handoffs a computation takes about 75 ms, and 20 operators reading the page at once queued behind each other's
# (docs/benchmarks.md). 0 computes them on every request. Pauses, holds and incidents on the page stay live.
HEALTH_FIGURES_SECONDS = env_float("HEALTH_FIGURES_SECONDS", 10.0)

# Calls that cost, limited per signed-in person (or per client address for the signed APIs): function ->
# (calls, within seconds), across web processes (outbox/services/call_limits.py; docs/security.md, "Limits on
# costly calls"). Over it: 429 with Retry-After, nothing done. Each call is one of `calls` database slots,
# written with every call: short windows keep them few (the signed APIs: 50 a second, 3,000 a minute).
CALL_LIMITS = {
    "handoff search": (env_int("CALL_LIMIT_SEARCHES", 10), 10),
    "audit export": (env_int("CALL_LIMIT_AUDIT_EXPORTS", 6), 60),
    "replay preview": (env_int("CALL_LIMIT_REPLAY_PREVIEWS", 6), 60),
    "bulk action": (env_int("CALL_LIMIT_BULK_ACTIONS", 10), 30),
    "trigger intake api": (env_int("CALL_LIMIT_INTAKE", 50), 1),
    "status events api": (env_int("CALL_LIMIT_STATUS_EVENTS", 50), 1),
}
