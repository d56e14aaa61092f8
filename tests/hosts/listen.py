"""Start a server that listens on an inherited socket (tests/processes.py's pattern) inside a host of its
own: `python -m tests.hosts.listen PORT COMMAND...` binds every address of the host's namespace on PORT, then
runs COMMAND with `{fd}` replaced by the socket's descriptor (tests/hosts/three_hosts.py)."""

import os
import socket
import sys


def main(port: str, *command: str) -> None:
    # Every address of this namespace: the host's own and its loopback (where aiosmtpd checks it answers).
    sock = socket.create_server(("0.0.0.0", int(port)), reuse_port=True)  # noqa: S104 - a namespace's own
    sock.set_inheritable(True)
    fd = str(sock.fileno())
    os.execvp(command[0], [part.replace("{fd}", fd) for part in command])  # noqa: S606


if __name__ == "__main__":
    main(*sys.argv[1:])
