"""Given figures for bench/pairs.py: sides that answer what they are told, on a machine taken as quiet."""

from bench.pairs import CpuGroups

QUIET = CpuGroups(
    outside=tuple
)  # nothing outside the bench: the shared machine's load plays no part


def scripted(*figures):
    return lambda index: figures[index]
