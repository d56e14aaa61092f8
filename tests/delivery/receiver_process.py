"""The receiver as a real gunicorn with several worker processes, on the test databases (PostgreSQL)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.processes import LOCAL_HTTP, ROOT, KernelPort, database_url, popen_listening


class Receiver:
    """gunicorn with `workers` sync worker processes. Its access log names the worker (pid) that
    answered each request, so a test can prove that more than one process served it (`access_format`, in
    gunicorn's access-log atoms, says more: the method and path, to count what was asked). `app` and
    `worker_class`: what it serves and how (the bench's timed receiver, `bench/receiver_timing.py`)."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        workers: int,
        env: dict[str, str],
        access_format: str = "%(p)s %(s)s",
        app: str = "config.wsgi",
        worker_class: str = "sync",
    ):
        self.held = KernelPort()
        self.port = self.held.port
        self.url = f"http://127.0.0.1:{self.port}/delivery/api"
        self.access_log = tmp_path / "access.log"
        self.error_log = tmp_path / "receiver.log"
        full_env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.test_settings",
            "PYTHONUNBUFFERED": "1",
            "DATABASE_URL": database_url("default"),
            "DELIVERY_DATABASE_URL": database_url("delivery"),
            **env,
        }
        self.proc = popen_listening(
            lambda fd: [
                str(Path(sys.executable).with_name("gunicorn")),
                app,
                "--bind",
                f"fd://{fd}",
                "--workers",
                str(workers),
                "--worker-class",
                worker_class,
                "--timeout",
                "60",
                "--access-logfile",
                str(self.access_log),
                "--access-logformat",
                access_format,
                "--error-logfile",
                str(self.error_log),
            ],
            self.held,
            cwd=ROOT,
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_until_up(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                # Its liveness probe, not an unsigned call to the signed API: each of those is a refused signature, a
                # security event (a poll that timed out on a loaded machine too), and ten page.
                if (
                    LOCAL_HTTP.get(
                        self.url.replace("/delivery/api", "/healthz"), timeout=5
                    ).status_code
                    == 200
                ):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("receiver did not start:\n" + self.error_log.read_text()[-3000:])

    def worker_pids_that_answered(self) -> set[str]:
        if not self.access_log.exists():
            return set()
        return {
            line.split()[0] for line in self.access_log.read_text().splitlines() if line.strip()
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.held.close()
