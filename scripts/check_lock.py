"""Fail when pyproject.toml and requirements/lock.txt disagree (`make lock-check`, a step of `make test`).

Offline: no index is asked. The lock is read as `uv pip compile` writes it (`make lock`): every pinned
line `name==version` with its hashes, and `# via` annotations that name where a requirement came from.

It fails when
- a requirement of pyproject.toml (runtime dependencies, the `test` extra, [build-system] requires) or of
  requirements/build.in has no pin, or its pin is outside the requirement's range (added or changed there);
- a pin says it comes from pyproject.toml or build.in, and neither asks for it any more (removed there);
- a pin has no hash (pip's --require-hashes would refuse the whole file anyway, later and less clearly).
A dependency of a new requirement is not checked here: `make lock` adds both.
"""

import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
BUILD_IN = ROOT / "requirements" / "build.in"
PROJECT_SOURCE = "(pyproject.toml)"
BUILD_SOURCE = "requirements/build.in"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
_VIA = re.compile(r"^\s+#\s+(?:via\s+)?(.+?)\s*$")


@dataclass
class Pin:
    version: str
    hashes: int = 0
    sources: list[str] = field(default_factory=list)


def read_lock(text: str) -> dict[str, Pin]:
    """The lock's pins by canonical name, each with its hash count and what its `# via` lines name."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    for line in text.splitlines():
        pin = _PIN.match(line)
        if pin:
            current = pins.setdefault(canonicalize_name(pin[1]), Pin(pin[2]))
        elif current is not None and "--hash=" in line:
            current.hashes += 1
        elif current is not None and (via := _VIA.match(line)) and via[1] != "via":
            current.sources.append(via[1].removeprefix("-r "))
    return pins


def wanted(pyproject: dict, build_in: str) -> dict[str, tuple[Requirement, str]]:
    """Every direct requirement, by canonical name, with the file that asks for it."""
    project = pyproject["project"]
    found: dict[str, tuple[Requirement, str]] = {}
    listed = [
        *project.get("dependencies", []),
        *project.get("optional-dependencies", {}).get("test", []),
        *pyproject.get("build-system", {}).get("requires", []),
    ]
    for line in listed:
        req = Requirement(line)
        found[canonicalize_name(req.name)] = (req, "pyproject.toml")
    for line in build_in.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            found.setdefault(canonicalize_name(req.name), (req, BUILD_SOURCE))
    return found


def problems(pyproject: dict, build_in: str, lock_text: str) -> list[str]:
    pins = read_lock(lock_text)
    direct = wanted(pyproject, build_in)
    found = []
    for name, (req, where) in sorted(direct.items()):
        pin = pins.get(name)
        if pin is None:
            found.append(f"{req} ({where}) is not in the lock")
        elif not req.specifier.contains(pin.version, prereleases=True):
            found.append(f"{req} ({where}) but the lock pins {name}=={pin.version}")
    for name, pin in sorted(pins.items()):
        from_us = [s for s in pin.sources if s.endswith(PROJECT_SOURCE) or s == BUILD_SOURCE]
        if from_us and name not in direct:
            found.append(
                f"the lock pins {name}=={pin.version} for {from_us[0]}, which no longer asks"
            )
        if pin.hashes == 0:
            found.append(f"the lock pins {name}=={pin.version} without a hash")
    return found


def main() -> int:
    if not LOCK.exists():
        print(f"{LOCK.relative_to(ROOT)} is missing: run `make lock`")
        return 1
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found = problems(pyproject, BUILD_IN.read_text(), LOCK.read_text())
    for problem in found:
        print(f"lock: {problem}")
    if found:
        print(
            "pyproject.toml and requirements/lock.txt disagree: run `make lock` and commit the lock"
        )
        return 1
    print(f"lock: {LOCK.relative_to(ROOT)} matches pyproject.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
