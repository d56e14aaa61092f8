"""The one function every CSV export of the product writes its cells through (OWASP, "CSV Injection").

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula (`=HYPERLINK(…)`, `+cmd|…`),
and a leading TAB or CR is dropped before it looks; some also skip leading blanks. Such a cell gets a leading
single quote, which spreadsheets show as text and do not run. Values written by people and receivers reach
the exports (reasons, notes, references), so every cell goes through `csv_cell`, not only the "free" ones.
Rows are RFC 4180 (`csv_line`): a cell holding a CR or LF is quoted, so it cannot start a row of its own (with
Python's writer and a "\n" line end, a bare CR went out unquoted and a spreadsheet split the row there).
"""

import csv
import io
from collections.abc import Iterable

# ASVS 5.0 1.2.10 names a leading NUL as well.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\x00")


def csv_cell(value: object) -> str:
    """`value` as a CSV cell a spreadsheet shows and never runs (None: empty): quoted when it, or its first
    non-blank character, starts a formula."""
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_STARTS) or text.lstrip().startswith(FORMULA_STARTS):
        return "'" + text
    return text


def csv_line(values: Iterable[object]) -> str:
    """One row of an export: each cell through `csv_cell`, quoted where RFC 4180 says so, ended by CRLF."""
    out = io.StringIO()
    csv.writer(out).writerow([csv_cell(value) for value in values])
    return out.getvalue()
