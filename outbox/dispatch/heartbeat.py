"""The dispatcher's heartbeat: proof for an orchestrator that a dispatcher's loop is turning.

The dispatcher's supervision loop beats after each pass that reached the database (lease expiry, new
destinations' loops started), at most once a second (`Beats`); `manage.py dispatcher_ready` is the readiness
probe that reads it. A loop stuck on a lock, a process frozen, or a database that no pass reaches stop the
beats, and the probe says so once the last beat is older than its bound.

A file per worker under HANDOFF_VAR_DIR/heartbeats, not a table: a readiness probe runs beside the
process it checks (same host, same container), and it must answer when the database does not. The beat and
the probe read the same host's clock, so one clock is compared with itself; nothing of record is kept here.
A beat costs no database statement.
"""

import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)
_failing = False
# A loop's beats at most this often (`Beats`): a readiness bound is seconds (`dispatcher_ready --within`, 30 by
# default), and a supervision turning every 50 ms (the benchmarks') spent a quarter of its CPU writing beats.
BEAT_EVERY_SECONDS = 1.0


@dataclass(frozen=True)
class Beat:
    worker: str
    pid: int
    at: float  # seconds since the epoch, this host's clock (the probe compares it with the same clock)

    def age(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.at


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str


def heartbeat_dir() -> Path:
    return Path(settings.VAR_DIR) / "heartbeats"


def _path(worker: str) -> Path:
    # Worker names are host:pid by default; keep the file name to a safe alphabet.
    return heartbeat_dir() / (re.sub(r"[^A-Za-z0-9._-]", "_", worker) + ".json")


def beat(worker: str) -> bool:
    """Record that `worker`'s loop turned just now; False when it could not be written. Written to a
    temporary file and renamed, so that a probe never reads half a beat. A beat that cannot be written
    (HANDOFF_VAR_DIR not writable) never stops the loop: the probe then says not ready, and the log says
    why once until a beat is written again."""
    global _failing
    path = _path(worker)
    try:
        try:
            _write(path, worker)
        # The first beat (or the folder removed): the folder made then, not at every beat.
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(path, worker)
    except OSError as exc:
        if not _failing:
            log.warning("heartbeat not written to %s (%s)", path.parent, type(exc).__name__)
        _failing = True
        return False
    _failing = False
    return True


class Beats:
    """One loop's beats: its first at once, then at most one every BEAT_EVERY_SECONDS (this host's monotonic
    clock); a beat that could not be written is tried again at the next turn."""

    def __init__(self, worker: str):
        self.worker = worker
        self._next = 0.0

    def beat(self) -> None:
        now = time.monotonic()
        # A clock stepped back (libfaketime steps the monotonic clock with the wall clock) would hold the next
        # beat back by the whole step: the probe would call a turning loop stuck.
        stepped_back = now < self._next - BEAT_EVERY_SECONDS
        if (now >= self._next or stepped_back) and beat(self.worker):
            self._next = now + BEAT_EVERY_SECONDS


def _write(path: Path, worker: str) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"worker": worker, "pid": os.getpid(), "at": time.time()}))
    os.replace(tmp, path)


def _read(path: Path) -> Beat | None:
    try:
        data = json.loads(path.read_text())
        return Beat(worker=str(data["worker"]), pid=int(data["pid"]), at=float(data["at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def last_beat(worker: str | None = None) -> Beat | None:
    """The latest beat of `worker`, or of any worker writing under this HANDOFF_VAR_DIR when not given."""
    if worker is not None:
        return _read(_path(worker))
    beats = [b for p in sorted(heartbeat_dir().glob("*.json")) if (b := _read(p)) is not None]
    return max(beats, key=lambda b: b.at, default=None)


def readiness(worker: str | None = None, *, within: float) -> Readiness:
    """Ready when the last beat is at most `within` seconds old (a few maintenance intervals)."""
    last = last_beat(worker)
    if last is None:
        missing = f"dispatcher {worker}: no beat yet" if worker else "no dispatcher has beaten yet"
        return Readiness(False, missing)
    age = last.age()
    if age > within:
        return Readiness(
            False, f"dispatcher {last.worker}: last beat {age:.1f}s ago (bound {within:g}s)"
        )
    return Readiness(True, f"dispatcher {last.worker}: loop turning (last beat {age:.1f}s ago)")
