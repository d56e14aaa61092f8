"""The fault tests' real processes (`tests/faults/conftest.py`), for the oracle's fault run."""

from tests.faults.conftest import processes  # noqa: F401 - a fixture, shared
