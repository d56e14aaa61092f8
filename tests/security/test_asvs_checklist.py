"""docs/security.md's "ASVS 5.0 Level 2 checklist" stays true.

The ids and levels of the requirements it must cover are committed in docs/asvs-5.0-level2-ids.txt (OWASP ASVS
v5.0.0, levels 1 and 2, of the chapters that apply; only ids and levels, not the standard's text). The checklist
fails here when a listed requirement has no row, when a row names a test file that does not exist or a test the
file does not define (read with `ast`: a module-level `def test_…`, or `Test…::test_…` of a class; a
parametrized id's `[…]` is stripped), and when a row's proof is neither tests, `n/a: why` nor `gap: what`.
Every `tests/….py::…` anywhere in a row is checked, including those a `gap:` row cites for the part that holds.
"""

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECURITY_MD = ROOT / "docs" / "security.md"
IDS_FILE = ROOT / "docs" / "asvs-5.0-level2-ids.txt"
HEADING = "## ASVS 5.0 Level 2 checklist"

ROW = re.compile(r"^\|\s*`?(?:v5\.0\.0-)?(\d+\.\d+\.\d+)`?\s*\|")
TEST_REF = re.compile(
    r"(?P<path>tests/[A-Za-z0-9_/]+\.py)::(?P<name>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)?)(?:\[[^\]\s]*\])?"
)
WHY_NOT = re.compile(r"^(n/a|gap):\s*\S")


def checklist_section(text: str) -> str:
    """The section's text, from its heading to the next heading of the same level (or the end)."""
    start = text.find("\n" + HEADING + "\n")
    assert start != -1, f"docs/security.md has no section {HEADING!r}"
    body = text[start + len(HEADING) + 2 :]
    following = re.search(r"^## ", body, flags=re.MULTILINE)
    return body[: following.start()] if following else body


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def checklist_rows(section: str) -> dict[str, list[list[str]]]:
    """Requirement id -> the rows for it (a list, so that a row given twice shows)."""
    rows: dict[str, list[list[str]]] = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            rows.setdefault(match.group(1), []).append(cells(line))
    return rows


def listed_requirements() -> dict[str, int]:
    listed = {}
    for line in IDS_FILE.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        requirement, level = line.split()
        assert requirement not in listed, f"{requirement} is listed twice"
        listed[requirement] = int(level)
    return listed


@cache
def defined_tests(path: str) -> frozenset[str]:
    """The tests a file defines, as pytest names them after the file: `test_x` and `TestY::test_x`."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name.startswith("test")
            )
    return frozenset(names)


def missing_tests(row_text: str) -> list[str]:
    """Each `tests/….py::name` in the text that names no file or no test of that file."""
    missing = []
    for ref in TEST_REF.finditer(row_text):
        path, name = ref.group("path"), ref.group("name")
        if not (ROOT / path).is_file():
            missing.append(f"{path} (no such file)")
        elif name not in defined_tests(path):
            missing.append(f"{path}::{name} (not defined there)")
    return missing


def proof_problem(proof: str) -> str | None:
    """Why a proof cell is neither a comma-separated list of tests, `n/a: why` nor `gap: what`; None if it is."""
    proof = proof.replace("`", "").strip()
    if WHY_NOT.match(proof):
        return None
    if not proof:
        return "the proof is empty"
    parts = [part.strip() for part in proof.split(",")]
    strays = [part for part in parts if not TEST_REF.fullmatch(part)]
    if strays:
        return f"neither tests, 'n/a: why' nor 'gap: what': {proof!r}"
    return None


@pytest.fixture(scope="module")
def rows() -> dict[str, list[list[str]]]:
    return checklist_rows(checklist_section(SECURITY_MD.read_text(encoding="utf-8")))


def test_the_id_list_holds_levels_1_and_2_of_the_ten_chapters():
    listed = listed_requirements()
    assert set(listed.values()) == {1, 2}
    chapters = {int(requirement.split(".")[0]) for requirement in listed}
    assert chapters == {1, 2, 4, 5, 6, 7, 8, 10, 13, 16}
    assert len(listed) == 175


def test_every_listed_requirement_has_one_row_and_every_row_is_listed(rows):
    listed = listed_requirements()
    without_row = [r for r in listed if r not in rows]
    assert not without_row, f"requirements without a row in the checklist: {without_row}"
    unknown = sorted(set(rows) - set(listed))
    assert not unknown, f"rows for ids that are not in {IDS_FILE.name}: {unknown}"
    twice = sorted(r for r, found in rows.items() if len(found) > 1)
    assert not twice, f"requirements with more than one row: {twice}"


def test_every_row_has_four_cells_and_a_proof(rows):
    problems = []
    for requirement, found in rows.items():
        for row in found:
            if len(row) != 4 or not (row[1] and row[3]):
                problems.append(
                    f"{requirement}: want 4 cells (id, requirement, how, proof), got {row}"
                )
            elif problem := proof_problem(row[3]):
                problems.append(f"{requirement}: {problem}")
    assert not problems, "\n".join(problems)


def test_every_test_a_row_names_exists(rows):
    problems = [
        f"{requirement}: {missing}"
        for requirement, found in rows.items()
        for row in found
        for missing in missing_tests(" | ".join(row))
    ]
    assert not problems, "\n".join(problems)


# The checker itself, on a section of three rows: it must see what it is meant to see.
SAMPLE = """
## ASVS 5.0 Level 2 checklist

| id | requirement | how it holds | proof |
| --- | --- | --- | --- |
| 6.3.1 | brute force | lockout | `tests/security/test_asvs_checklist.py::test_every_test_a_row_names_exists` |
| 5.2.3 | archives | none | n/a: no archive is accepted |
| 7.3.2 | lifetime | sliding | gap: renewed, see tests/security/test_asvs_checklist.py::test_nowhere |

## Next section

| 1.1.1 | outside the section | | tests/nowhere.py::test_x |
"""


def test_the_checker_reads_rows_ids_and_test_names_as_pytest_does():
    found = checklist_rows(checklist_section(SAMPLE))
    assert sorted(found) == ["5.2.3", "6.3.1", "7.3.2"]
    assert [proof_problem(row[3]) for [row] in found.values()] == [None, None, None]
    assert missing_tests(" | ".join(found["6.3.1"][0])) == []
    assert missing_tests(" | ".join(found["7.3.2"][0])) == [
        "tests/security/test_asvs_checklist.py::test_nowhere (not defined there)"
    ]
    parametrized = (
        "tests/security/test_headers.py::test_console_pages_have_no_inline_script_or_style[/]"
    )
    assert missing_tests(parametrized) == []
    assert missing_tests("tests/security/test_nowhere.py::test_x") == [
        "tests/security/test_nowhere.py (no such file)"
    ]
    assert proof_problem("see the code") is not None
    assert proof_problem("n/a:") is not None and proof_problem("") is not None
