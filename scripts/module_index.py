"""docs/architecture.md's module index: every module of the apps, one line each, with the first sentence of its
docstring. `python scripts/module_index.py` prints the index; `--write` replaces the section in the doc.
tests/scripts/test_architecture_map.py fails when a module is missing from the doc or the doc names a path that
no longer exists."""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = (
    "approvals",
    "console",
    "config",
    "delivery",
    "httpapi",
    "lib",
    "outbox",
    "reconciliation",
    "incidents",
)
DOC = ROOT / "docs" / "architecture.md"
HEADING = "## Module index"
END = "<!-- end of the module index -->"


def modules() -> list[Path]:
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts or path.name == "__init__.py":
                continue
            found.append(rel)
    return sorted(found, key=lambda p: (p.parent.as_posix(), p.name))


def summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse((ROOT / path).read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split())
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0] if text else ""
    first = first.rstrip(".:;")
    return first if len(first) <= 160 else first[:157].rsplit(" ", 1)[0] + " …"


def index() -> str:
    lines = [
        HEADING,
        "",
        "Every module of the apps, by folder, with the first sentence of its docstring (regenerate with",
        "`python scripts/module_index.py --write`; `tests/scripts/test_architecture_map.py` fails when a module",
        "is missing here or this page names a path that no longer exists).",
    ]
    folder = None
    for path in modules():
        if path.parent != folder:
            folder = path.parent
            lines += ["", f"**`{folder.as_posix()}/`**", ""]
        words = summary(path)
        lines.append(f"- `{path.as_posix()}`" + (f": {words}" if words else ""))
    return "\n".join(lines) + "\n\n" + END + "\n"


def write() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.find("\n" + HEADING + "\n")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + index()
    else:
        end = text.index(END, start) + len(END) + 1
        text = text[: start + 1] + index() + text[end:]
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write()
    else:
        sys.stdout.write(index())
