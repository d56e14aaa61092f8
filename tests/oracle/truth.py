"""The ground truth a claim is checked against, read from the tables (rows as `values()`, never the
console's words, selectors or model properties): the console's database (handoffs, attempts, manual
repairs, findings, requests, destinations' health, incidents), the receiver's own records (its tasks and
the events it recorded and sent) and the database's clock.

Each `truth_of_<claim>` returns the set of values that are true now (usually one); the oracle
(`tests/oracle/oracle.py`) fails a claim whose value is not in it. docs/console.md lists them."""

from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count

from approvals.models import Membership, Request
from delivery.models import ReceiverTask, TaskEvent
from incidents.models import Incident
from outbox.clock import db_time
from outbox.models import Attempt, DestinationHealth, Handoff
from outbox.models.holds import DestinationHold
from reconciliation.models import Finding, ManualRepair
from reconciliation.selectors.health import HEALTH_COUNT_CAP

DONE, FAILED, UNFINISHED = "done", "failed", frozenset({"open", "in_progress"})
ANSWERED = frozenset({"created", "duplicate"})  # an attempt whose answer was a validated receipt


def _row(model, **filters) -> dict | None:
    return model.objects.filter(**filters).values().first()


@dataclass
class HandoffTruth:
    """What the tables say about one handoff."""

    row: dict
    attempts: list[dict]
    repairs: list[dict]
    findings: list[dict]
    compensation: dict | None
    receiver_tasks: list[dict] = field(default_factory=list)
    receiver_events: list[dict] = field(default_factory=list)
    receiver_known: bool = False

    @property
    def delivered(self) -> bool:
        return self.row["state"] == "delivered"

    def settling_repair(self) -> dict | None:
        task = self.row["destination_id"]
        named = [
            r
            for r in self.repairs
            if r["receiver_task_id"]
            and r["receiver_task_id"] == task
            and r["resulting_state"] == "delivered"
        ]
        return named[-1] if named else None

    def outcome_evidence(self) -> set[str]:
        if not self.delivered:
            return set()
        if self.settling_repair() is not None:
            return {"repair"}
        receipt = self.row["receipt"] or {}
        if receipt.get("found_by") == "lookup":
            return {"lookup"}
        answered = any(a["outcome"] in ANSWERED for a in self.attempts)
        if receipt and answered:
            return {"receipt"}
        return {"unrecorded"}

    def recorded_task_statements(self) -> list[tuple[bool, object]]:
        row, said = self.row, []
        if row["delivered_at"]:
            said.append((True, row["delivered_at"]))
        if row["task_checked_at"] and row["task_seen"] is not None:
            said.append((row["task_seen"], row["task_checked_at"]))
        said += [
            (False, f["last_seen_at"]) for f in self.findings if f["kind"] == "missing_at_receiver"
        ]
        said += [
            (True, r["at"])
            for r in self.repairs
            if r["receiver_task_id"] and r["receiver_task_id"] == row["destination_id"]
        ]
        return said

    def task_at_receiver(self) -> set[str]:
        """yes/no: the newest statement recorded; the receiver's records must not contradict it (a task
        it said it deleted, in an event it sent, is not there; a task it still holds is not gone)."""
        if not self.delivered:
            return set()
        said = self.recorded_task_statements()
        found = max(said, key=lambda s: s[1])[0] if said else True
        answer = "yes" if found else "no"
        if self.receiver_known and not self._receiver_agrees(found):
            return set()
        return {answer}

    def _receiver_agrees(self, found: bool) -> bool:
        task_id = str(self.row["destination_id"] or "")
        holds = any(str(t["task_id"]) == task_id for t in self.receiver_tasks)
        told_deleted = any(
            e["kind"] == "deleted" and str(e["task_id"]) == task_id and e["sent_at"]
            for e in self.receiver_events
        )
        if found:
            return holds or not told_deleted
        return not holds or self._recreated_after_the_word()

    def _recreated_after_the_word(self) -> bool:
        # A repair that re-created the task names another id: the handoff's id is the one asked about.
        return False

    def task_gone_accounted(self) -> bool:
        said = self.recorded_task_statements()
        gone_at = max(said, key=lambda s: s[1])[1] if said else None
        return any(r["at"] and gone_at and r["at"] >= gone_at for r in self.repairs)

    def work(self) -> set[str]:
        row = self.row
        if not self.delivered:
            return {"na"}
        status = row["work_status"]
        by_delivery = (
            status == DONE
            and row["work_reported_at"] is None
            and row["work_checked_at"] is not None
            and row["work_checked_at"] == row["delivered_at"]
        )
        if by_delivery:
            return {"by_delivery"}
        if status == DONE:
            return {"done"} if self._receiver_says(DONE) else set()
        if self.work_repair() is not None:
            return {"by_hand"}
        if status == FAILED:
            return {"failed"} if self._receiver_says(FAILED) else set()
        if status in UNFINISHED:
            return {"unfinished"} if self._receiver_may_still_work() else set()
        return {"unreported"}

    def _receiver_says(self, status: str) -> bool:
        if not self.receiver_known:
            return True
        now = any(t["status"] == status for t in self.receiver_tasks)
        return now or any(e["status"] == status for e in self.receiver_events)

    def _receiver_may_still_work(self) -> bool:
        """Open work, cross-checked with the receiver: its task is open or in progress, or it has not sent
        word yet of the work ending (the one lag left: until its status event arrives, or a pull or a
        reconciliation run reads the status, the console knows only what it was told)."""
        if not self.receiver_known:
            return True
        ended = {DONE, FAILED}
        if any(t["status"] not in ended for t in self.receiver_tasks):
            return True
        told = [e for e in self.receiver_events if e["sent_at"] and e["status"] in ended]
        return not told

    def work_repair(self) -> dict | None:
        row = self.row
        if row["work_status"] == DONE:
            return None
        reported = row["work_reported_at"] or row["work_checked_at"] or row["delivered_at"]

        def covers(r: dict) -> bool:
            if r["covered_kind"]:
                return r["covered_kind"] == "work_failed"
            return row["work_status"] == FAILED

        after = [r for r in self.repairs if covers(r) and (reported is None or r["at"] >= reported)]
        return after[-1] if after else None

    def held(self) -> set[str]:
        """An operator's hold of its case covers it (the column the claim reads, `Handoff.case_hold`)."""
        return {"yes"} if self.row["case_hold_id"] else {"no"}

    def state(self) -> set[str]:
        if self.delivered and self.task_at_receiver() == {"no"}:
            return {"task_gone"}
        return {self.row["state"]}

    def assignee(self) -> set[str]:
        owner = self.row["owner_id"]
        if owner is None:
            return {"nobody"}
        user = get_user_model().objects.filter(pk=owner).values_list("username", flat=True)
        return set(user)

    def next_attempt_at(self) -> set[str]:
        moment = self.row["next_attempt_at"]
        return {moment.isoformat()} if moment else set()

    def work_status(self) -> set[str]:
        if self.delivered and self.task_at_receiver() == {"no"}:
            return {"gone"}
        return {self.row["work_status"] or "none"}


class Truth:
    """The ground truth of one moment, read lazily and kept for that moment (`Truth()` again re-reads)."""

    def __init__(self, receiver_destinations: frozenset[str] | None = None):
        """Made before the screens are rendered: `started` is the database's clock then; a fact that
        depends on the clock is true if it is true at `started` or at the check (`now`)."""
        self.receiver_destinations = receiver_destinations
        self._handoffs: dict[int, HandoffTruth | None] = {}
        self.started = db_time()

    @cached_property
    def now(self):
        return db_time()

    def handoff(self, pk: int) -> HandoffTruth | None:
        if pk not in self._handoffs:
            self._handoffs[pk] = self._read_handoff(pk)
        return self._handoffs[pk]

    def _read_handoff(self, pk: int) -> HandoffTruth | None:
        row = _row(Handoff, pk=pk)
        if row is None:
            return None
        key = row["action_key"]
        truth = HandoffTruth(
            row=row,
            attempts=list(Attempt.objects.filter(handoff_id=pk).values()),
            repairs=list(
                ManualRepair.objects.filter(workspace_id=row["workspace_id"], action_key=key)
                .order_by("at", "id")
                .values()
            ),
            findings=list(
                Finding.objects.filter(action_key=key).exclude(status="resolved").values()
            ),
            compensation=_row(Handoff, compensates_id=pk),
        )
        known = self.receiver_destinations
        if known is None or row["destination"] in known:
            truth.receiver_known = True
            truth.receiver_tasks = list(ReceiverTask.objects.filter(action_key=key).values())
            truth.receiver_events = list(
                TaskEvent.objects.filter(action_key=key).order_by("occurred_at").values()
            )
        return truth

    # --- who owns the next step ----------------------------------------------------------------

    def handoff_owner(self, pk: int) -> set[str]:
        h = self.handoff(pk)
        if h is None:
            return set()
        row = h.row
        if row["compensation_state"]:
            return self._reversal_owner(h)
        state = row["state"]
        if state == "delivered":
            return self._delivered_owner(h)
        if state in ("pending", "in_flight"):
            return self._sending_owner(row)
        return {
            "uncertain": {"system"},
            "needs_attention": {"operator"},
            "cancelled": {"none"},
            "observed": {"none"},
            "superseded": {"approvers"},
        }.get(state, set())

    def _reversal_owner(self, h: HandoffTruth) -> set[str]:
        undo = h.compensation
        if undo is None and h.row["compensation_state"] == "planned":
            return self._waiting_reversal_owner(h)
        if h.row["compensation_state"] == "residual":
            # It cannot be reversed automatically: it stays until an operator undoes it by hand.
            return {"operator"}
        if undo is None:
            return {"operator", "none", "requester"}
        return {
            "delivered": {"none", "requester"},
            "needs_attention": {"operator"},
            "uncertain": {"operator"},
            "pending": {"system"},
            "in_flight": {"system"},
        }.get(undo["state"], {"none", "operator"})

    @staticmethod
    def _waiting_reversal_owner(h: HandoffTruth) -> set[str]:
        """A step whose compensation is not recorded yet: compensations go latest step first, so it waits for
        the later steps' (an operator's if one of them needs a person, else the system's)."""
        row = h.row
        later = Handoff.objects.filter(
            instance_key=row["instance_key"], kind="action", step_index__gt=row["step_index"]
        ).values("pk")
        undos = Handoff.objects.filter(compensates_id__in=later).values_list("state", flat=True)
        return {"operator"} if set(undos) & {"needs_attention", "uncertain"} else {"system"}

    def _delivered_owner(self, h: HandoffTruth) -> set[str]:
        if "@" in (h.row["destination_id"] or ""):
            return {"none"}  # an e-mail: sending it was the work
        if h.task_at_receiver() == {"no"}:
            return {"none"} if h.task_gone_accounted() else {"operator"}
        kinds = {f["kind"] for f in h.findings}
        work = h.work()
        if work == {"by_hand"} and "work_failed" not in kinds:
            return {"none"}
        if work == {"failed"} or "work_failed" in kinds or kinds:
            return {"operator"}
        if work & {"done", "by_delivery"}:
            return {"none"}
        return {"workers"}

    def _sending_owner(self, row: dict) -> set[str]:
        """The system sends it, unless an operator's pause or window holds its destination (then the
        operators own the next step) at the page's moment or the check's."""
        if row["state"] == "pending" and row["case_hold_id"]:
            return {"operator"}  # its case is held: the operator who holds it resumes it
        health = self.destination(row["destination"])
        if health is None or row["state"] != "pending":
            return {"system"}
        states = {_destination_state_at(health, m) for m in (self.started, self.now)}
        return {"operator" if s == "window" else "system" for s in states}

    # --- requests ----------------------------------------------------------------------------

    def request(self, pk: int) -> dict | None:
        return _row(Request, pk=pk)

    def request_owner(self, pk: int) -> set[str]:
        """One owner, by one rule: awaiting approval, the approvers when one may decide it (a member with
        the approver role who neither requested nor corrected it), else the operators; rejected, the
        requester; approved, from its steps in the workflow's order: the operators if any step's owner is
        the operators; while its delivered steps are being reversed the system, once reversed the requester;
        nobody when nothing was sent (observed, cancelled) or every step is done; else the owner of the first
        step not done. A step's owner is `handoff_owner`, read from the rows."""
        req = self.request(pk)
        if req is None:
            return set()
        state = req["state"]
        if state == "awaiting_approval":
            return {"approvers"} if self._someone_may_decide(req) else {"operator"}
        if state != "approved":
            return {"rejected": {"requester"}}.get(state, {"none"})
        key = f"{req['workflow']}:{req['workspace_id']}:{req['number']}:{req['revision']}"
        rows = list(
            Handoff.objects.filter(instance_key=key)
            .order_by("step_index", "pk")
            .values("pk", "kind", "state")
        )
        steps = [r for r in rows if r["kind"] == "action"]
        owners = [self.handoff_owner(r["pk"]) for r in steps]
        if any(o == {"operator"} for o in owners):
            return {"operator"}
        undo = [r for r in rows if r["kind"] != "action"]
        if undo:
            return {"requester"} if all(r["state"] == "delivered" for r in undo) else {"system"}
        if all(r["state"] in ("observed", "cancelled") for r in steps):
            return {"none"}
        return next((o for o in owners if o != {"none"}), {"none"})

    @staticmethod
    def _someone_may_decide(req: dict) -> bool:
        others = Membership.objects.filter(workspace_id=req["workspace_id"], role="approver")
        barred = {req["requested_by_id"], req["corrected_by_id"]} - {None}
        return others.exclude(user_id__in=barred).exists()

    # --- destinations and figures ------------------------------------------------------------

    def destination(self, name: str) -> dict | None:
        """The destination's health row, with its holds not ended early (an operator's pause or window, a
        Retry-After hold, the breaker's)."""
        row = _row(DestinationHealth, name=name)
        if row is not None:
            holds = DestinationHold.objects.filter(destination=name, ended_at__isnull=True)
            row["holds"] = list(holds.values("starts_at", "ends_at", "kind"))
        return row

    def destination_state(self, name: str) -> set[str] | None:
        row = self.destination(name)
        if row is None:
            return {"active"}  # no health row yet: nothing has held it
        return {_destination_state_at(row, moment) for moment in (self.started, self.now)}

    def next_probe_at(self, name: str) -> set[str] | None:
        row = self.destination(name)
        if row is None:
            return {"none"}
        moment = row["next_probe_at"]
        return {moment.isoformat() if moment else "none"}

    def incident_state(self, pk: int) -> set[str] | None:
        row = _row(Incident, pk=pk)
        return None if row is None else {row["state"]}

    def health_count(self, state: str, workspaces: list[int]) -> set[str]:
        """A Health count of handoffs in `state`: exact, or any number past the cap once the rows are more."""
        cap = getattr(settings, "HEALTH_COUNT_CAP", HEALTH_COUNT_CAP)
        n = Handoff.objects.business().filter(state=state, workspace_id__in=workspaces).count()
        return {str(n)} if n <= cap else {str(cap + 1)}

    def retries_exhausted(self, workspaces: list[int]) -> set[str]:
        cap = getattr(settings, "HEALTH_COUNT_CAP", HEALTH_COUNT_CAP)
        rows = Handoff.objects.business().filter(
            workspace_id__in=workspaces, state="needs_attention"
        )
        n = rows.filter(reason_code="retries_exhausted").count()
        return {str(n)} if n <= cap else {str(cap + 1)}

    def delivered_in_window(self, figure: str, workspaces: list[int]) -> set[str]:
        """Health's figures of the steps delivered since the hour 23 hours before the page's moment (read at
        the look's start and at the check): all of them, those whose work failed, the cases they completed."""
        return {str(self._delivered_since(figure, workspaces, m)) for m in (self.started, self.now)}

    def _delivered_since(self, figure: str, workspaces: list[int], moment) -> int:
        start = moment.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
        rows = Handoff.objects.business().filter(
            workspace_id__in=workspaces, state="delivered", delivered_at__gte=start
        )
        if figure == "completed":
            return rows.count()
        if figure == "work_failed":
            return rows.filter(work_status=FAILED).count()
        lasts = rows.filter(kind="action", work_status=DONE, plan=[]).values("instance_key")
        return sum(1 for last in lasts if self._case_done(last["instance_key"]))

    @staticmethod
    def _case_done(instance_key: str) -> bool:
        if not instance_key:
            return True
        rows = Handoff.objects.filter(instance_key=instance_key).values(
            "kind", "state", "work_status"
        )
        return all(
            r["kind"] == "action" and r["state"] == "delivered" and r["work_status"] == DONE
            for r in rows
        )

    def handoff_states(self) -> dict[str, int]:
        rows = Handoff.objects.values("state").annotate(n=Count("id"))
        return {r["state"]: r["n"] for r in rows}


def _destination_state_at(row: dict, moment) -> str:
    live = {
        h["kind"]
        for h in row["holds"]
        if h["starts_at"] <= moment and (h["ends_at"] is None or h["ends_at"] > moment)
    }
    if live & {"operator_pause", "window"}:
        return "window"
    # The breaker's pause is its live hold (never the `state` column, kept for the previous release only).
    if "unservable" in live:
        return "unservable"
    if live & {"breaker", "credential"}:
        return "breaker"
    return "retry_after" if "retry_after" in live else "active"
