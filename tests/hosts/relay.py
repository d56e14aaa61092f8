"""A faulty TCP relay: the delay between hosts on a kernel without `tc netem` (tests/hosts/network.py), and
the faults of one link that a schedule plays (the SMTP link: tests/hosts/schedules.py).

Runs inside a host's namespace in front of its server: `python -m tests.hosts.relay LISTEN_HOST:PORT
TARGET_HOST:PORT CONTROL_FILE`. CONTROL_FILE (read again at most every 0.1 s) holds `DELAY [MODE]`:
- DELAY, seconds: each chunk read from either side is passed on once that long has gone by since it arrived;
  order is kept, and the delay is latency, not a bandwidth limit;
- MODE `drop`: nothing passes while it lasts; what was sent waits and passes once it ends (as TCP's
  retransmissions would deliver it), so a client that gives up first sees a silent peer;
- MODE `reset`: every open connection is reset (RST) and every new one is reset at once while it lasts.
It prints its address once it listens.
"""

import asyncio
import contextlib
import socket
import struct
import sys
import time
from pathlib import Path


class Control:
    def __init__(self, control: Path):
        self.control, self.delay, self.mode, self.read_at = control, 0.0, "", 0.0

    def _read(self) -> None:
        now = time.monotonic()
        if now - self.read_at <= 0.1:
            return
        self.read_at = now
        try:
            parts = self.control.read_text().split()
            self.delay = float(parts[0]) if parts else 0.0
            self.mode = parts[1] if len(parts) > 1 else ""
        except (OSError, ValueError):
            self.delay, self.mode = 0.0, ""

    def seconds(self) -> float:
        self._read()
        return self.delay

    def now(self) -> str:
        self._read()
        return self.mode


def _reset(writer) -> None:
    """Close with a RST, not a FIN: the peer's next read or write fails at once."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _pipe(reader, writer, control: Control) -> None:
    queue: asyncio.Queue = asyncio.Queue()

    async def send() -> None:
        while (item := await queue.get()) is not None:
            due, data = item
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            while control.now() == "drop":
                await asyncio.sleep(0.1)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(65536):
            queue.put_nowait((time.monotonic() + control.seconds(), data))
    finally:
        queue.put_nowait(None)
        with contextlib.suppress(ConnectionError, OSError):
            await sender


async def _watch(control: Control, writers: list) -> None:
    """Resets this connection's two sides once a `reset` is in force."""
    while control.now() != "reset":
        await asyncio.sleep(0.1)
    for writer in writers:
        _reset(writer)


async def _serve(target: tuple[str, int], control: Control, client_r, client_w) -> None:
    if control.now() == "reset":
        _reset(client_w)
        return
    try:
        server_r, server_w = await asyncio.open_connection(*target)
    except OSError:
        client_w.close()
        return
    watch = asyncio.create_task(_watch(control, [client_w, server_w]))
    try:
        await asyncio.gather(
            _pipe(client_r, server_w, control),
            _pipe(server_r, client_w, control),
            return_exceptions=True,
        )
    finally:
        watch.cancel()
        client_w.close()
        server_w.close()


async def main(listen: str, target: str, control_file: str) -> None:
    host, port = listen.rsplit(":", 1)
    to_host, to_port = target.rsplit(":", 1)
    control = Control(Path(control_file))
    server = await asyncio.start_server(
        lambda r, w: _serve((to_host, int(to_port)), control, r, w), host, int(port)
    )
    print(f"relay listening on {listen}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
