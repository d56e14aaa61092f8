"""Import what the current process did with many observed cases from one CSV file, all or nothing.

Columns (a header row names them, in any order): `action_key` and `task_created` (yes/no) are required;
`receiver`, `outcome` and `reference` are optional. Every row is checked before anything is written: one
unknown key, a key of another workspace, a bad value or a malformed row refuses the whole file, each
reason named by its row number (the header is row 1). docs/observation.md."""

import csv
import io

from approvals.errors import InvalidPayload
from approvals.models import ObservedOutcome
from approvals.services.observation import CurrentProcessOutcome, observed_outcomes_record_all

MAX_BYTES = 256 * 1024
MAX_ROWS = 2000
REQUIRED = ("action_key", "task_created")
COLUMNS = (*REQUIRED, "receiver", "outcome", "reference")
YES = {"yes", "y", "true", "1"}
NO = {"no", "n", "false", "0"}


def _text(data: bytes) -> str:
    if len(data) > MAX_BYTES:
        raise InvalidPayload([f"the file is larger than {MAX_BYTES // 1024} KiB"])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidPayload(["the file is not UTF-8 text"]) from None
    if "\x00" in text:
        raise InvalidPayload(["the file holds a NUL character: not a CSV file"])
    return text


def _header(reader) -> list[str]:
    header = [name.strip().lower() for name in next(reader, [])]
    missing = [name for name in REQUIRED if name not in header]
    unknown = [name for name in header if name not in COLUMNS]
    problems = [f"row 1: the header has no {name} column" for name in missing]
    problems += [
        f"row 1: unknown column {name!r}; the columns are {', '.join(COLUMNS)}" for name in unknown
    ]
    if problems:
        raise InvalidPayload(problems)
    return header


def _entry(number: int, header: list[str], cells: list[str]):
    if len(cells) != len(header):
        return None, [f"row {number}: {len(cells)} cells where the header has {len(header)}"]
    row = {name: cell.strip() for name, cell in zip(header, cells, strict=True)}
    created = row["task_created"].lower()
    problems = []
    if not row["action_key"]:
        problems.append(f"row {number}: action_key is empty")
    if created not in YES | NO:
        problems.append(f"row {number}: task_created is {row['task_created']!r}; write yes or no")
    if problems:
        return None, problems
    entry = CurrentProcessOutcome(
        key=row["action_key"],
        task_created=created in YES,
        receiver=row.get("receiver", ""),
        outcome=row.get("outcome", ""),
        reference=row.get("reference", ""),
    )
    return entry, []


def parse_outcomes(data: bytes) -> list[tuple[int, CurrentProcessOutcome]]:
    """The numbered entries of a CSV file, or InvalidPayload naming every row that is malformed."""
    reader = csv.reader(io.StringIO(_text(data), newline=""))
    try:
        header = _header(reader)
        entries, problems = [], []
        for cells in reader:
            number = reader.line_num
            if not any(cell.strip() for cell in cells):
                continue
            if len(entries) + len(problems) >= MAX_ROWS:
                raise InvalidPayload([f"the file has more than {MAX_ROWS} rows"])
            entry, refused = _entry(number, header, cells)
            problems += refused
            if entry is not None:
                entries.append((number, entry))
    except csv.Error as exc:
        raise InvalidPayload([f"row {reader.line_num}: not CSV ({exc})"]) from None
    if problems:
        raise InvalidPayload(problems)
    if not entries:
        raise InvalidPayload(["the file has no rows under its header"])
    return entries


def observed_outcomes_import(
    *, workspace_id: int, rule_version: str, data: bytes, actor
) -> list[ObservedOutcome]:
    """Record every row of the file, or none: the cases must be observed cases of this workspace and rule
    version (a key of another workspace is as unknown here as a key that does not exist)."""
    entries = parse_outcomes(data)
    return observed_outcomes_record_all(
        workspace_id=workspace_id, entries=entries, actor=actor, rule_version=rule_version
    )
