"""Observation mode's writes: a workflow's pilot brief (owner, exception path), what the current process did
with an observed case, and the owner's explanation of a disagreement. docs/observation.md."""

from dataclasses import dataclass

from django.db import transaction

from approvals.agreement import compare, is_owner, may_record, observed_case, planned_steps
from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import ObservedOutcome, OutcomeSource, PilotBrief
from lib.control_characters import control_character_problem
from lib.databases import DB
from outbox.clock import db_now

MAX_TEXT = 2000


class ObservationRefused(ApprovalDenied):
    """The actor may not record or explain this workflow's observed results."""


@dataclass(frozen=True)
class CurrentProcessOutcome:
    """What the current process did with one case, as a person recorded it."""

    key: str  # the observed case's action key (or its instance key)
    task_created: bool
    receiver: str = ""
    outcome: str = ""
    reference: str = ""

    def problems(self) -> list[str]:
        """Why the entry cannot be recorded: a field too long, or a control character (the outcome is
        lines of text; the receiver and reference are one line each)."""
        problems = []
        for name, value, limit in (
            ("receiver", self.receiver, 40),
            ("outcome", self.outcome, MAX_TEXT),
            ("reference", self.reference, 120),
        ):
            if len(value) > limit:
                problems.append(f"{name} is too long")
            elif problem := control_character_problem(value, multiline=name == "outcome"):
                problems.append(f"{name}: {problem}")
        return problems


def pilot_brief_set(*, workflow: str, owner, exception_path: str, actor) -> PilotBrief:
    """Name a workflow's business owner and its exception path (who handles an exception, and how)."""
    if not actor.has_perm("approvals.change_workflowmode"):
        raise ApprovalDenied(f"{actor} may not change a workflow's pilot brief")
    with transaction.atomic(using=DB):
        brief, _ = PilotBrief.objects.update_or_create(
            workflow=workflow,
            defaults={"owner": owner, "exception_path": exception_path, "updated_by": actor},
        )
    return brief


def _outcome_row(
    *, workspace_id: int, entry: CurrentProcessOutcome, actor, source: str, rule_version: str | None
):
    """The unsaved row for one entry, or the reasons it is refused (no such observed case in this
    workspace, or under this rule version; bad fields)."""
    problems = entry.problems()
    case = observed_case(workspace_id, entry.key)
    if case is None:
        return None, [f"no observed case {entry.key!r} in workspace {workspace_id}", *problems]
    if rule_version is not None and case.rule_version != rule_version:
        problems.append(
            f"case {entry.key!r} is of rule version {case.rule_version}, not {rule_version}"
        )
    if problems:
        return None, problems
    if not may_record(actor, workspace_id, case.workflow):
        raise ObservationRefused(
            f"only an operator of workspace {workspace_id} or the owner of {case.workflow} records its outcomes"
        )
    planned = planned_steps(case)
    agrees, difference = compare(planned, task_created=entry.task_created, receiver=entry.receiver)
    row = ObservedOutcome(
        workspace_id=workspace_id,
        workflow=case.workflow,
        rule_version=case.rule_version,
        action_key=case.action_key,
        planned=planned,
        task_created=entry.task_created,
        receiver=entry.receiver,
        outcome=entry.outcome,
        reference=entry.reference,
        source=source,
        recorded_by=actor,
        agrees=agrees,
        difference=difference,
    )
    return row, []


def _store(rows: list[ObservedOutcome]) -> None:
    """Store the rows as the current recordings of their cases; an earlier recording stays as history."""
    with transaction.atomic(using=DB):
        for row in rows:
            ObservedOutcome.objects.current().filter(
                workspace_id=row.workspace_id, action_key=row.action_key
            ).update(current=False)
            row.save(using=DB)


def observed_outcome_record(
    *, workspace_id: int, entry: CurrentProcessOutcome, actor, source: str = OutcomeSource.FORM
) -> ObservedOutcome:
    """Record what the current process did with one observed case, compared with the product's plan."""
    row, problems = _outcome_row(
        workspace_id=workspace_id, entry=entry, actor=actor, source=source, rule_version=None
    )
    if problems:
        raise InvalidPayload(problems)
    _store([row])
    return row


def observed_outcomes_record_all(
    *,
    workspace_id: int,
    entries: list[tuple[int, CurrentProcessOutcome]],
    actor,
    rule_version: str | None = None,
) -> list[ObservedOutcome]:
    """Record many outcomes (numbered rows of an import) all or nothing: any refused row refuses them all,
    each refusal named by its row."""
    rows, problems, seen = [], [], {}
    for number, entry in entries:
        row, refused = _outcome_row(
            workspace_id=workspace_id,
            entry=entry,
            actor=actor,
            source=OutcomeSource.CSV,
            rule_version=rule_version,
        )
        problems += [f"row {number}: {reason}" for reason in refused]
        if row is None:
            continue
        if row.action_key in seen:
            problems.append(
                f"row {number}: case {entry.key!r} is also on row {seen[row.action_key]}"
            )
        seen.setdefault(row.action_key, number)
        rows.append(row)
    if problems:
        raise InvalidPayload(problems)
    _store(rows)
    return rows


def observed_outcome_explain(
    *, workspace_id: int, outcome_id: int, explanation: str, actor
) -> ObservedOutcome:
    """The workflow's owner explains a disagreement (why the product and the current process differ, and
    what is done about it). Only the owner: seed 001, expand only after the owner can explain failures."""
    explanation = explanation.strip()
    if not explanation:
        raise InvalidPayload(["an explanation is required"])
    if len(explanation) > MAX_TEXT:
        raise InvalidPayload([f"the explanation is longer than {MAX_TEXT} characters"])
    with transaction.atomic(using=DB):
        row = (
            ObservedOutcome.objects.current()
            .select_for_update(no_key=True)
            .filter(workspace_id=workspace_id, pk=outcome_id, agrees=False)
            .first()
        )
        if row is None:
            raise InvalidPayload(["no such disagreement in this workspace"])
        if not is_owner(actor, row.workflow):
            raise ObservationRefused(f"only the owner of {row.workflow} explains its disagreements")
        row.explanation = explanation
        row.explained_by = actor
        row.explained_at = db_now()
        row.save(update_fields=["explanation", "explained_by", "explained_at"])
        row.refresh_from_db(fields=["explained_at"])
    return row
