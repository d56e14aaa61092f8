"""gunicorn opens no control socket: through one, whoever reaches it resizes, reloads or stops the server, and
two servers of one user shared its path (gunicorn.conf.py)."""

import pytest

from tests.faults.conftest import Processes
from tests.processes import LOCAL_HTTP

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_a_served_gunicorn_opens_no_control_socket(transactional_db, tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    procs = Processes(tmp_path)
    # gunicorn's default path is $XDG_RUNTIME_DIR/gunicorn.ctl when that is set: here, a directory of this test's.
    procs.base_env["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        receiver = procs.start_receiver()
        alive = receiver.replace("/delivery/api", "/healthz")
        assert LOCAL_HTTP.get(alive, timeout=10).status_code == 200
        assert procs.receiver.poll() is None
        assert list(runtime.iterdir()) == []
    finally:
        procs.stop_all()
