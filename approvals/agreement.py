"""Observed cases and the agreement of the product's plan with what the current process did.

The rule that decides whether the two agree is written once here (`compare`), applied when an outcome is
recorded, and stored with it; the counts and lists that the console shows are read here too.
docs/observation.md."""

from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from approvals.models import ObservedOutcome, PilotBrief, Role
from approvals.selectors import user_has_role
from lib.paging import keyset_page
from outbox.models import Handoff, HandoffKind, HandoffState


def observed_cases(workspace_id: int, rule_version: str | None = None) -> QuerySet[Handoff]:
    """The cases a workflow observed in a workspace: each is the handoff it would have sent, never sent."""
    cases = Handoff.objects.filter(workspace_id=workspace_id, state=HandoffState.OBSERVED)
    return cases if rule_version is None else cases.filter(rule_version=rule_version)


def observed_case(workspace_id: int, key: str) -> Handoff | None:
    """One observed case of the workspace by its action key or its instance key (`onboarding:7:42:1`)."""
    return (
        observed_cases(workspace_id)
        .filter(Q(action_key=key) | Q(instance_key=key))
        .order_by("step_index")
        .first()
    )


def planned_steps(case: Handoff) -> list[dict]:
    """Where the product would have created tasks for the case: its first step, then the rest of its plan."""
    first = {"step": case.step or case.workflow, "destination": case.destination}
    rest = [
        {"step": entry["step"], "destination": entry["destination"]}
        for entry in case.plan
        if entry.get("kind", HandoffKind.ACTION) == HandoffKind.ACTION
    ]
    return [first, *rest]


def compare(planned: list[dict], *, task_created: bool, receiver: str) -> tuple[bool, str]:
    """(agrees, the difference in words). The product would create a task at each planned destination: the
    current process agrees when it created the task too, at one of them (or at a receiver it did not name)."""
    destinations = [step["destination"] for step in planned]
    if not task_created:
        return (
            False,
            f"the product would create a task at {', '.join(destinations)}; the current process created none",
        )
    if receiver and receiver not in destinations:
        return (
            False,
            f"the current process created it at {receiver}; the product plans {', '.join(destinations)}",
        )
    return True, ""


def brief_of(workflow: str) -> PilotBrief | None:
    return PilotBrief.objects.select_related("owner").filter(workflow=workflow).first()


def is_owner(user, workflow: str) -> bool:
    return PilotBrief.objects.filter(workflow=workflow, owner_id=user.pk).exists()


def may_record(user, workspace_id: int, workflow: str) -> bool:
    """An operator of the workspace, or the workflow's owner, records what the current process did."""
    return user_has_role(user, workspace_id, Role.OPERATOR) or is_owner(user, workflow)


@dataclass(frozen=True)
class Agreement:
    observed: int
    recorded: int
    agree: int
    disagree: int
    unexplained: int

    @property
    def not_recorded(self) -> int:
        return max(self.observed - self.recorded, 0)


def _agreement(cases: QuerySet[Handoff], outcomes: QuerySet[ObservedOutcome]) -> Agreement:
    counts = outcomes.current().aggregate(
        recorded=Count("id"),
        agree=Count("id", filter=Q(agrees=True)),
        unexplained=Count("id", filter=Q(agrees=False, explained_at__isnull=True)),
    )
    return Agreement(
        observed=cases.count(),
        recorded=counts["recorded"],
        agree=counts["agree"],
        disagree=counts["recorded"] - counts["agree"],
        unexplained=counts["unexplained"],
    )


def agreement_of(workspace_id: int, rule_version: str) -> Agreement:
    """The counts of one rule version's observed cases in one workspace (three queries)."""
    return _agreement(
        observed_cases(workspace_id, rule_version),
        ObservedOutcome.objects.filter(workspace_id=workspace_id, rule_version=rule_version),
    )


def workflow_agreement(workflow: str) -> Agreement:
    """The counts of a workflow across every workspace: what its owner confirms before it goes live."""
    return _agreement(
        Handoff.objects.filter(workflow=workflow, state=HandoffState.OBSERVED),
        ObservedOutcome.objects.filter(workflow=workflow),
    )


def observed_versions(workspace_ids: list[int]) -> list[dict]:
    """Each (workspace, workflow, rule version) with observed cases in the user's workspaces, with its counts."""
    rows = (
        Handoff.objects.filter(workspace_id__in=workspace_ids, state=HandoffState.OBSERVED)
        .values("workspace_id", "workflow", "rule_version")
        .annotate(observed=Count("id"))
        .order_by("workspace_id", "workflow", "rule_version")
    )
    return [
        {**row, "agreement": agreement_of(row["workspace_id"], row["rule_version"])} for row in rows
    ]


def unrecorded_cases(workspace_id: int, rule_version: str, *, limit: int = 50) -> list[Handoff]:
    """Observed cases with no recorded outcome yet, oldest first (what is left to record)."""
    recorded = ObservedOutcome.objects.current().filter(
        workspace_id=workspace_id, action_key=OuterRef("action_key")
    )
    return list(
        observed_cases(workspace_id, rule_version)
        .filter(~Exists(recorded))
        .order_by("created_at", "id")[:limit]
    )


def disagreements_page(
    workspace_id: int, rule_version: str, *, after: tuple | None, size: int = 20
) -> tuple[list[ObservedOutcome], bool]:
    """The disagreeing cases, newest recording first, a keyset page at a time."""
    rows = ObservedOutcome.objects.disagreeing().filter(
        workspace_id=workspace_id, rule_version=rule_version
    )
    return keyset_page(
        rows.select_related("recorded_by", "explained_by"),
        after=after,
        size=size,
        field="recorded_at",
    )


def outcome_of(workspace_id: int, outcome_id: int) -> ObservedOutcome | None:
    return (
        ObservedOutcome.objects.current()
        .filter(workspace_id=workspace_id, pk=outcome_id)
        .select_related("recorded_by")
        .first()
    )
