"""Run a command and say how close its wall time came to the machine's ceiling for the CPU it used.

    python3 scripts/cpu_time.py [--name NAME] [--json FILE] -- COMMAND [ARG...]

On a machine of N cores, work that needs C seconds of CPU cannot end in less than C / N seconds of wall time,
however it is laid out: that is the ceiling. `make test` runs under this (Makefile, `test-suites`), so that
its time is reported beside it. Counted: the CPU of the command's whole process tree once it has been reaped
(getrusage RUSAGE_CHILDREN: make reaps its suites, pytest its servers, browsers and private PostgreSQL
clusters), and that of the machine's PostgreSQL servers that were running before the command (their
processes' own and reaped CPU, read from /proc at both ends: the backends of the suites' connections are
children of the postmaster, not of the command). Everything else on the machine is left out, and is named
("others") so that a reader sees whether the machine was shared.

Prints one line at the end and exits with the command's own exit status.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[str, list[str]] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces; the fields after it are space-separated.
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    return name, raw[raw.rindex(")") + 2 :].split()


def postgres_seconds(pids: set[str] | None = None) -> tuple[float, set[str]]:
    """CPU seconds of the `postgres` processes (own + reaped children), and their pids. With `pids`, only the
    servers among them that are still there (a postmaster started later belongs to the command's tree)."""
    total, seen = 0.0, set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        stat = _stat(pid)
        if stat is None or stat[0] != "postgres":
            continue
        fields = stat[1]
        parent = fields[1]
        # A postmaster's parent is not a postgres process; a backend's CPU reaches its postmaster's counts
        # when it exits, and is counted directly while it runs.
        if pids is not None and pid not in pids and parent not in pids:
            continue
        seen.add(pid)
        utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
        total += (utime + stime + cutime + cstime) / TICKS
    return total, seen


def machine_seconds() -> float:
    """All CPU time the machine has spent not idle (from /proc/stat), in seconds of one core."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    # guest and guest_nice are already inside user and nice.
    busy = sum(values[:8]) - idle
    return busy / TICKS


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--name", help="what to call the command in the line printed (default: the command)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --")
    cores = os.cpu_count() or 1
    pg_before, servers = postgres_seconds()
    machine_before = machine_seconds()
    began = time.monotonic()
    status = subprocess.call(command)  # noqa: S603 -- the command the caller asked to run
    wall = time.monotonic() - began
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree = children.ru_utime + children.ru_stime
    pg_after, _ = postgres_seconds(servers)
    pg = max(0.0, pg_after - pg_before)
    machine = machine_seconds() - machine_before
    used = tree + pg
    others = max(0.0, machine - used)
    ceiling = used / cores
    figures = {
        "command": command,
        "exit_status": status,
        "cores": cores,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": {
            "tree": round(tree, 1),
            "postgresql": round(pg, 1),
            "total": round(used, 1),
        },
        "others_cpu_seconds": round(others, 1),
        "ceiling_seconds": round(ceiling, 1),
        "wall_to_ceiling": round(wall / ceiling, 2) if ceiling else None,
        "load_average_at_end": Path("/proc/loadavg").read_text().split()[:3],
    }
    print(
        f"== {args.name or ' '.join(command)}: {_minutes(wall)} of wall time for {_minutes(used)} of CPU "
        f"({_minutes(tree)} its processes', {_minutes(pg)} PostgreSQL's); on {cores} cores its ceiling is "
        f"{_minutes(ceiling)}, the wall time {figures['wall_to_ceiling']}x that; everything else on the "
        f"machine used {_minutes(others)} of CPU meanwhile; exit {status} ==",
        flush=True,
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
