"""Workflows as data: a file of workflows (their rules and routed steps) applied as new rule versions.

`manage.py workflows apply FILE` publishes a workflow whose schema or steps differ from the version in
force, through `rule_version_publish` (its checks: the schema, the steps, each step's destination enabled).
A step the version in force has and the file lacks is never dropped silently: the file names it under
`removes`, so the removal is in version control beside the change (docs/intake.md, "Workflows as data").
"""

import re
from dataclasses import dataclass, field

from django.db import transaction

from approvals.errors import InvalidPayload
from approvals.rules import rules_for
from approvals.services.approval_deadlines import approval_policy_problems, approval_policy_set
from approvals.services.rule_versions import (
    reserved_name_problems,
    rule_version_problems,
    rule_version_publish,
)
from lib.databases import DB

WORKFLOW_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
ENTRY_PARTS = {"name", "schema", "steps", "notes", "removes", "approval"}


@dataclass(frozen=True)
class WorkflowChange:
    workflow: str
    version: str
    published: bool
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rerouted: list[str] = field(default_factory=list)
    # "set" or "removed" when the file changed the workflow's approval deadline (its `approval` part).
    approval: str = ""

    def describe(self) -> str:
        deadline = f"; approval deadline {self.approval}" if self.approval else ""
        if not self.published:
            return f"{self.workflow}: unchanged ({self.version}){deadline}"
        parts = [f"{self.workflow}: published {self.version}"]
        for words, names in (("added", self.added), ("removed", self.removed)):
            if names:
                parts.append(f"steps {words}: {', '.join(names)}")
        if self.rerouted:
            parts.append(f"steps changed: {', '.join(self.rerouted)}")
        return "; ".join(parts) + deadline


def _current(workflow: str) -> tuple[dict, list[dict]]:
    """The schema and steps in force; none for a workflow that has no rules yet."""
    try:
        rules = rules_for(workflow)
    except LookupError:
        return {}, []
    return rules.schema, list(rules.steps)


def _is_names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _entry_shape(index: int, entry: object) -> list[str]:
    where = f"workflows[{index}]"
    if not isinstance(entry, dict):
        return [f"{where}: an object with a name, a schema and steps"]
    name = entry.get("name")
    checks = [
        (
            not (set(entry) - ENTRY_PARTS),
            f"unknown parts {', '.join(sorted(set(entry) - ENTRY_PARTS))}",
        ),
        (
            isinstance(name, str) and WORKFLOW_NAME.fullmatch(name),
            ".name: lowercase letters, digits and _, at most 40",
        ),
        (isinstance(entry.get("schema"), dict), ".schema: a JSON Schema object"),
        (isinstance(entry.get("steps", []), list), ".steps: a list of steps"),
        (_is_names(entry.get("removes", [])), ".removes: a list of step names"),
        (isinstance(entry.get("notes", ""), str), ".notes: text"),
    ]
    shape = [
        f"{where}{'' if words.startswith('.') else ': '}{words}" for ok, words in checks if not ok
    ]
    reserved = reserved_name_problems(name) if isinstance(name, str) else []
    return shape + [f"{where}.name: {words}" for words in reserved]


def _removal_problems(where: str, entry: dict, current_steps: list[dict]) -> list[str]:
    now = [s["name"] for s in current_steps]
    wanted = {s.get("name") for s in entry.get("steps", []) if isinstance(s, dict)}
    removes = set(entry.get("removes", []))
    problems = [
        f"{where}.steps: step {name!r} is in force and missing from the file; name it in "
        f"{where}.removes to remove it"
        for name in now
        if name not in wanted and name not in removes
    ]
    problems += [
        f"{where}.removes: {name!r} is not a step in force" for name in removes if name not in now
    ]
    return problems


def _document_shape(document: object) -> list[str]:
    if not isinstance(document, dict) or set(document) != {"workflows"}:
        return ['the file is {"workflows": [...]}']
    entries = document["workflows"]
    if not isinstance(entries, list) or not entries:
        return ["workflows: a list of at least one workflow"]
    problems = [p for index, entry in enumerate(entries) for p in _entry_shape(index, entry)]
    names = [entry["name"] for entry in entries] if not problems else []
    if len(names) != len(set(names)):
        problems.append("workflows: each workflow once")
    return problems


def _searchable_problems(where: str, schema: dict) -> list[str]:
    """`x-searchable` marks a field the console's search finds a case by (`approvals/rules.py`
    `searchable_fields` reads only `true`): any other value than a boolean is a typo, refused."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    return [
        f"{where}.schema.properties.{name}.x-searchable: true or false, not {rule['x-searchable']!r}"
        for name, rule in properties.items()
        if isinstance(rule, dict)
        and "x-searchable" in rule
        and not isinstance(rule["x-searchable"], bool)
    ]


def workflows_document_problems(document: object) -> list[str]:
    """Why the file cannot be applied, each problem naming its place; empty when it can."""
    if problems := _document_shape(document):
        return problems
    for index, entry in enumerate(document["workflows"]):
        where = f"workflows[{index}] ({entry['name']})"
        problems += [
            f"{where}: {p}"
            for p in rule_version_problems(schema=entry["schema"], steps=entry.get("steps", []))
        ]
        problems += _searchable_problems(where, entry["schema"])
        problems += _removal_problems(where, entry, _current(entry["name"])[1])
        if "approval" in entry:
            problems += approval_policy_problems(f"{where}.approval", entry["approval"])
    return problems


def _step_diff(steps: list[dict], wanted: list[dict]) -> dict[str, list[str]]:
    before = {s["name"]: s for s in steps}
    after = {s["name"]: s for s in wanted}
    return {
        "added": [n for n in after if n not in before],
        "removed": [n for n in before if n not in after],
        "rerouted": [n for n in after if before.get(n, after[n]) != after[n]],
    }


def _change(entry: dict, current: tuple[dict, list[dict]]) -> WorkflowChange | None:
    """What publishing the entry would change, or None when it matches the version in force."""
    schema, steps = current
    wanted = entry.get("steps", [])
    if schema == entry["schema"] and steps == wanted:
        return None
    return WorkflowChange(entry["name"], "", True, **_step_diff(steps, wanted))


def workflows_apply(*, document: object, actor, notes: str = "") -> list[WorkflowChange]:
    """Publish every workflow of the file that differs from the version in force, all or nothing."""
    if problems := workflows_document_problems(document):
        raise InvalidPayload(problems)
    changes = []
    with transaction.atomic(using=DB):
        for entry in document["workflows"]:
            change = _change(entry, _current(entry["name"]))
            policy = entry.get("approval")
            deadline = approval_policy_set(workflow=entry["name"], policy=policy)
            deadline_words = ("set" if policy else "removed") if deadline else ""
            if change is None:
                latest = rules_for(entry["name"]).version
                changes.append(
                    WorkflowChange(entry["name"], latest, False, approval=deadline_words)
                )
                continue
            stored = rule_version_publish(
                workflow=entry["name"],
                schema=entry["schema"],
                steps=entry.get("steps", []),
                actor=actor,
                notes=entry.get("notes") or notes,
            )
            changes.append(
                WorkflowChange(
                    entry["name"],
                    stored.version,
                    True,
                    change.added,
                    change.removed,
                    change.rerouted,
                    deadline_words,
                )
            )
    return changes
