"""Settings for running the product under an orchestrator (docs/operations.md).

The probes are answered over plain HTTP on the pod's own address: an HTTPS redirect would answer them
with a 301, which an orchestrator counts as success whatever the state, so they are exempt from it.
"""

SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
