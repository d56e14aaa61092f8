"""Online migrations, the deploy as it happens (issue 26): the previous release's dispatchers keep working
against the schema the new release migrated, while they run.

The previous release is the last commit that was released (it passed CI and landed: `PREVIOUS_RELEASE`,
moved on at each release; HANDOFF_PREVIOUS_RELEASE names another), taken out of git with `git archive`.
Not "the commit before the newest migration": that is any commit of the work in progress, which may not even
start (one was found that imported a module committed a commit later). On a PostgreSQL server of
its own: the old code migrates its schema and records handoffs; its `manage.py dispatch` (run with this
virtualenv's Python) starts against a real receiver; the current code migrates the database while it runs;
then both the current code and the old code record more handoffs. Every handoff, from either release, must
be delivered exactly once. A new column the old code does not know (not nullable, no database default), a
table rewrite that blocks it, or a renamed column it reads fails this test.

It needs the repository's history: in a shallow clone it fails and says how to get it (it never skips)."""

import os
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from tests.faults.conftest import Processes
from tests.faults.test_dispatch_faults import wait_until
from tests.processes import ROOT, loaded_deadline

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    # The run's own test databases are not used (the private server holds this deploy), but the suite's
    # session checks read them: they exist like every fault test's.
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]

RECORD = """
from outbox.services import handoff_record
for n in range({first}, {last} + 1):
    handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref=f"request {{n}} revision 1",
        source_id=n,
        action_key=f"onboarding:7:{{n}}:1",
        payload={{"client_name": f"Client {{n}}", "plan": "standard"}},
    )
import outbox
print(outbox.__file__)
"""


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


# The release before this work: the commit stop 53 landed with (CI passed). Its schema ends at outbox 0036,
# approvals 0017, reconciliation 0014, delivery 0005, incidents 0003; every migration after those is deployed over
# it here (incidents 0004 and 0005, outbox 0037 deployed over it).
PREVIOUS_RELEASE = "be08339e059861926cd72bb4061c449a16fc5ea1"


def previous_release() -> str:
    """The commit of the release the deploy starts from."""
    if git("rev-parse", "--is-shallow-repository") == "true":
        pytest.fail(
            "the old-code-on-migrated-schema test needs the git history (this clone is shallow): "
            "run `git fetch --unshallow` (or clone without --depth) and run it again"
        )
    rev = os.environ.get("HANDOFF_PREVIOUS_RELEASE", "") or PREVIOUS_RELEASE
    return git("rev-parse", "--verify", f"{rev}^{{commit}}")


def extract(rev: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", rev], cwd=ROOT, capture_output=True, timeout=120, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


class OldRelease:
    """The previous release's manage.py, run with this virtualenv's Python against the private server."""

    def __init__(self, tree: Path, procs: Processes):
        self.tree, self.procs = tree, procs

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(self.tree / "manage.py"), *args],
            cwd=self.tree,
            env=self.procs.dispatcher_env(),
            capture_output=True,
            text=True,
            timeout=loaded_deadline(600),
        )
        assert done.returncode == 0, f"old release: manage.py {args[0]}\n{done.stdout}{done.stderr}"
        return done.stdout

    def dispatcher(self) -> subprocess.Popen:
        log = open(self.procs.tmp_path / "old-dispatcher.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, str(self.tree / "manage.py"), "dispatch", "--worker", "old-1"]
            + ["--maintain-every", "0.5", "--idle-sleep", "0.1"],
            cwd=self.tree,
            env=self.procs.dispatcher_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc.log_path = self.procs.tmp_path / "old-dispatcher.log"
        self.procs.procs.append(proc)
        return proc


def record(manage, first: int, last: int) -> str:
    """Record handoffs first..last with that release's own service; returns where its code was imported from."""
    return manage("shell", "-c", RECORD.format(first=first, last=last)).strip().splitlines()[-1]


def test_the_previous_releases_dispatcher_delivers_every_handoff_once_on_the_migrated_schema(
    private_postgres, tmp_path
):
    procs = Processes(tmp_path)
    procs.base_env.update(
        DATABASE_URL=private_postgres.url("handoff"),
        DELIVERY_DATABASE_URL=private_postgres.url("handoff_delivery"),
    )
    old = OldRelease(extract(previous_release(), tmp_path / "previous-release"), procs)
    try:
        old.manage("migrate", "--no-input")
        old.manage("migrate", "--no-input", "--database", "delivery")
        imported_from = record(old.manage, 1, 5)
        assert imported_from.startswith(str(old.tree)), f"old code imported from {imported_from}"
        procs.start_receiver()
        dispatcher = old.dispatcher()
        # The deploy: the current release migrates while the old dispatcher works.
        procs.manage("migrate", "--no-input")
        procs.manage("migrate", "--no-input", "--database", "delivery")
        record(procs.manage, 6, 10)  # the new release's handoffs
        record(old.manage, 11, 15)  # the old release's, on the new schema
        source = ("SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'", "handoff")
        wait_until(
            lambda: private_postgres.sql(source[0], dbname=source[1])[0][0] == 15,
            timeout=loaded_deadline(120),
            what="the old dispatcher to deliver all 15 handoffs",
            procs=[dispatcher],
        )
        per_key = private_postgres.sql(
            "SELECT action_key, count(*) FROM delivery_receivertask GROUP BY action_key",
            dbname="handoff_delivery",
        )
        assert sorted(per_key) == sorted((f"onboarding:7:{n}:1", 1) for n in range(1, 16))
        assert dispatcher.poll() is None, dispatcher.log_path.read_text()[-3000:]
        # Still the old release serving: its log names no error.
        assert "Traceback" not in dispatcher.log_path.read_text()
    finally:
        procs.stop_all()
