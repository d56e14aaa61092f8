"""The shape rules of docs/architecture.md that import-linter does not check, run by `make lint`.

- no module of the apps over 600 lines (migrations aside): one idea a module, grouped by subject, not cut
  to fit a smaller cap (CONVENTIONS.md; issue 36 asked for 600 instead of 400);
- no function over 50 lines;
- no import of another app (or of this project's shared leaves) inside a function body: an import moved
  into a function to dodge a cycle is still a cycle (`ready()` hooks that connect signals aside).

Prints each breach with its place and exits 1 if there is any.
"""

import ast
import sys
from pathlib import Path

from module_index import APPS

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 50


def _modules():
    for package in APPS:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield package, path


def _imported_packages(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module.split(".")[0]]
    return []


def _function_breaches(package: str, path: Path, tree: ast.Module) -> list[str]:
    where = path.relative_to(ROOT)
    breaches = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = node.end_lineno - node.lineno + 1
        if length > MAX_FUNCTION_LINES:
            breaches.append(
                f"{where}:{node.lineno}: {node.name} is {length} lines (> {MAX_FUNCTION_LINES})"
            )
        if node.name == "ready":
            continue
        for inner in ast.walk(node):
            for imported in _imported_packages(inner):
                if imported in APPS and imported != package:
                    breaches.append(
                        f"{where}:{inner.lineno}: {node.name} imports {imported} inside its body"
                    )
    return breaches


def main() -> int:
    breaches = []
    for package, path in _modules():
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            breaches.append(f"{path.relative_to(ROOT)}: {lines} lines (> {MAX_MODULE_LINES})")
        breaches += _function_breaches(package, path, ast.parse(text))
    for breach in breaches:
        print(breach)
    if breaches:
        print(f"check_structure: {len(breaches)} breach(es) of docs/architecture.md's shape rules")
        return 1
    print("check_structure: modules, functions and imports within the shape rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
