"""The runtime's database account proves itself with a certificate, not a password (ASVS 5.0 13.2.1;
docs/operations.md, "Service accounts and database roles"). A private PostgreSQL server listens on TCP in a
network namespace of its own and, for `handoff_app`, accepts only TLS with a client certificate that the
deployment's CA signed for that name (pg_hba `cert`: no password exists). A real `manage.py dispatch --once`
in that namespace delivers a handoff with URLs that name the certificate files; the same URL without a
certificate, with a certificate for another name, or asking for a password, is refused."""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.faults.test_database_roles import APPROVE_42
from tests.hosts.postgres_cluster import PostgresServer
from tests.processes import ROOT, bytecode_cache, manage_argv, migrated_template_dump

pytestmark = [pytest.mark.postgres, pytest.mark.faults]

HBA = """\
local     all   all                            trust
hostssl   all   handoff_app   127.0.0.1/32     cert
host      all   all           127.0.0.1/32     reject
"""
TIMEOUT = 300  # seconds: the suite must pass at a load of 10


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key_and_request(name: str, cn: str, cwd: Path) -> None:
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=cwd,
    )  # fmt: skip


def _signed(name: str, cn: str, cwd: Path, *, ca: str = "ca", extension: str = "") -> None:
    _key_and_request(name, cn, cwd)
    extra = []
    if extension:
        (cwd / f"{name}.ext").write_text(extension + "\n")
        extra = ["-extfile", f"{name}.ext"]
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", *extra, cwd=cwd,
    )  # fmt: skip
    (cwd / f"{name}.key").chmod(0o600)


def _authority(name: str, cwd: Path) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "1", "-subj", f"/CN={name}",
        cwd=cwd,
    )  # fmt: skip


@pytest.fixture
def namespace():
    name = f"hcert{os.getpid()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.fixture
def certificate_server(namespace):
    """A server in `namespace` on 127.0.0.1:5432 (the namespace's own: no port is shared with anyone),
    TLS on with the deployment CA's server certificate, handoff_app by certificate only."""
    root = Path(tempfile.mkdtemp(prefix="handoff-cert-pg-"))
    pki = root / "pki"
    pki.mkdir()
    _authority("ca", pki)
    _authority("other-ca", pki)
    _signed("server", "127.0.0.1", pki, extension="subjectAltName=IP:127.0.0.1")
    _signed("app", "handoff_app", pki)
    _signed("stranger", "handoff_owner", pki)
    _signed("forged", "handoff_app", pki, ca="other-ca")
    server = PostgresServer(
        root / "pg",
        port=5432,
        listen_addresses="127.0.0.1",
        command_prefix=["ip", "netns", "exec", namespace],
    )
    try:
        server.initdb()
        for name in ("server.crt", "server.key", "ca.crt"):
            shutil.copy(pki / name, server.data / name)
            if server.as_root:
                shutil.chown(server.data / name, "postgres")
        (server.data / "server.key").chmod(0o600)
        with (server.data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
                "ssl_ca_file = 'ca.crt'\n"
            )
        (server.data / "pg_hba.conf").write_text(HBA)
        server.start()
        server.pki = pki
        yield server
    finally:
        with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


def _tcp_url(server, dbname: str, cert: str | None) -> str:
    url = (
        f"postgres://handoff_app@127.0.0.1:5432/{dbname}?sslmode=verify-full"
        f"&sslrootcert={server.pki / 'ca.crt'}"
    )
    if cert:
        url += f"&sslcert={server.pki / f'{cert}.crt'}&sslkey={server.pki / f'{cert}.key'}"
    return url


def _socket_url(server, role: str, dbname: str) -> str:
    return server.url(dbname).replace(f"//{server.user}@", f"//{role}@")


def _in_namespace(namespace: str, server, args: list[str], database_urls: tuple[str, str]):
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "DATABASE_URL": database_urls[0],
        "DELIVERY_DATABASE_URL": database_urls[1],
        "HANDOFF_DESTINATION": "in_process",
        "HANDOFF_WAKE_ON_COMMIT": "0",
        "HANDOFF_VAR_DIR": str(server.root / "var"),
        # The URL names no password: libpq must never find one elsewhere.
        "PGPASSFILE": os.devnull,
        **bytecode_cache(),
    }
    return subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def _connects(namespace: str, server, url: str) -> subprocess.CompletedProcess:
    code = (
        "import sys, dj_database_url, psycopg; c = dj_database_url.parse(sys.argv[1]); "
        "psycopg.connect(host=c['HOST'], port=c['PORT'], user=c['USER'], dbname=c['NAME'], "
        "connect_timeout=30, **c['OPTIONS']).close()"
    )
    return _in_namespace(namespace, server, ["-c", code, url], ("", ""))


def _migrate_as_owner(namespace: str, server, owner: tuple[str, str]) -> None:
    """Both databases at the latest migration, their tables the migrations' role's: `make test`'s migrated
    template loaded as SQL by `handoff_owner` where the run has one (the certificate is what this test is
    about; a migrate costs 20 s of CPU, and tests/faults/test_database_roles.py migrates as that role), else
    `manage.py migrate` as that role."""
    dumps = {"handoff": migrated_template_dump("default")}
    dumps["handoff_delivery"] = migrated_template_dump("delivery")
    if all(dumps.values()):
        for dbname, dump in dumps.items():
            server.load(dump, dbname, user="handoff_owner")
        return
    for args in (["migrate", "--no-input"], ["migrate", "--no-input", "--database", "delivery"]):
        done = _in_namespace(namespace, server, manage_argv(*args)[1:], owner)
        assert done.returncode == 0, done.stderr[-3000:]


def test_the_runtime_role_delivers_with_a_client_certificate_and_nothing_else_gets_in(
    namespace, certificate_server
):
    server = certificate_server
    script = (ROOT / "scripts" / "database_roles.sql").read_text()
    for dbname in ("handoff", "handoff_delivery"):
        server.sql(f"CREATE DATABASE {dbname}")
        server.sql(script, dbname=dbname)
    owner = (
        _socket_url(server, "handoff_owner", "handoff"),
        _socket_url(server, "handoff_owner", "handoff_delivery"),
    )
    _migrate_as_owner(namespace, server, owner)
    done = _in_namespace(namespace, server, manage_argv("shell", "-c", APPROVE_42)[1:], owner)
    assert done.returncode == 0, done.stderr[-3000:]

    by_certificate = (
        _tcp_url(server, "handoff", "app"),
        _tcp_url(server, "handoff_delivery", "app"),
    )
    done = _in_namespace(
        namespace, server, manage_argv("dispatch", "--once", "--worker", "w1")[1:], by_certificate
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [(state, key)] = server.sql("SELECT state, action_key FROM outbox_handoff", dbname="handoff")
    assert state == "delivered"
    assert server.sql(
        "SELECT count(*) FROM delivery_receivertask WHERE action_key = %s",
        dbname="handoff_delivery",
        params=(key,),
    ) == [(1,)]
    # The certificate alone opens a session (the control for the refusals below).
    assert _connects(namespace, server, _tcp_url(server, "handoff", "app")).returncode == 0

    refusals = {
        "no certificate": _tcp_url(server, "handoff", None),
        "a certificate for another role": _tcp_url(server, "handoff", "stranger"),
        "a certificate another CA signed": _tcp_url(server, "handoff", "forged"),
        "no TLS at all": "postgres://handoff_app@127.0.0.1:5432/handoff?sslmode=disable",
    }
    for what, url in refusals.items():
        done = _connects(namespace, server, url)
        assert done.returncode != 0, f"{what}: connected"
        assert "OperationalError" in done.stderr, (what, done.stderr[-1500:])
