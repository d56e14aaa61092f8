"""The bundled accounts service (delivery/accounts.py, delivery/accounts_api.py), a second receiving system
for the demo and the tests (imported by `config.settings`)."""

import os

from config.env import env_float

# The bearer tokens it accepts (a rotation's overlap).
ACCOUNTS_API_TOKEN = os.environ.get("ACCOUNTS_API_TOKEN", "")
ACCOUNTS_API_TOKEN_PREVIOUS = os.environ.get("ACCOUNTS_API_TOKEN_PREVIOUS", "")
# Seconds an account stays "pending" after it is made before it is "active" (its work done): what a
# destination pulling its work status reads (docs/destinations.md "Work status").
ACCOUNTS_ACTIVATION_SECONDS = env_float("ACCOUNTS_ACTIVATION_SECONDS", 3.0)
