"""docs/architecture.md places every module of the apps, and names no path that no longer exists (issue 36: the
map had missed about 55 modules and named a path the code had left)."""

import importlib.util
import re

from tests.processes import ROOT

spec = importlib.util.spec_from_file_location("module_index", ROOT / "scripts" / "module_index.py")
module_index = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module_index)
DOC, modules = module_index.DOC, module_index.modules

PATH = re.compile(r"`((?:" + "|".join(module_index.APPS) + r")/[\w/]+\.py)`")


def test_every_module_of_the_apps_is_on_the_map():
    text = DOC.read_text(encoding="utf-8")
    missing = [p.as_posix() for p in modules() if f"`{p.as_posix()}`" not in text]
    assert not missing, (
        f"not in docs/architecture.md (python scripts/module_index.py --write): {missing}"
    )


def test_every_path_the_map_names_exists():
    text = DOC.read_text(encoding="utf-8")
    stale = sorted({p for p in PATH.findall(text) if not (ROOT / p).exists()})
    assert not stale, f"docs/architecture.md names paths that no longer exist: {stale}"
