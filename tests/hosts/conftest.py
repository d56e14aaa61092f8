"""Fixtures of the hosts harness: the network and database server once a session, fresh databases and
processes per test; everything removed even when a test fails (finalizers), and a crashed run's leftovers
at the next start (`network.sweep_stale`)."""

import shutil
import tempfile
from pathlib import Path

import pytest
from django.conf import settings

from tests.hosts.harness import HostsCluster, Run


@pytest.fixture(scope="session")
def hosts_cluster():
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="hosts-", dir=settings.VAR_DIR)).resolve()
    root.chmod(0o755)  # the server runs as the postgres user
    cluster = None
    try:
        cluster = HostsCluster(root)
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def hosts(hosts_cluster, tmp_path):
    run = Run(hosts_cluster, tmp_path)
    try:
        yield run
    finally:
        run.close()
