"""A delaying TCP relay: the delay between hosts on a kernel without `tc netem` (tests/hosts/network.py).

Runs inside a host's namespace in front of its server: `python -m tests.hosts.relay LISTEN_HOST:PORT
TARGET_HOST:PORT CONTROL_FILE`. Each chunk read from either side is passed on once the delay written in
CONTROL_FILE (seconds, read again at most every 0.1 s) has gone by since it arrived; order is kept, and the
delay is latency, not a bandwidth limit. It prints its address once it listens.
"""

import asyncio
import contextlib
import sys
import time
from pathlib import Path


class Delay:
    def __init__(self, control: Path):
        self.control, self.value, self.read_at = control, 0.0, 0.0

    def seconds(self) -> float:
        now = time.monotonic()
        if now - self.read_at > 0.1:
            self.read_at = now
            try:
                self.value = float(self.control.read_text().strip() or 0)
            except (OSError, ValueError):
                self.value = 0.0
        return self.value


async def _pipe(reader, writer, delay: Delay) -> None:
    queue: asyncio.Queue = asyncio.Queue()

    async def send() -> None:
        while (item := await queue.get()) is not None:
            due, data = item
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(65536):
            queue.put_nowait((time.monotonic() + delay.seconds(), data))
    finally:
        queue.put_nowait(None)
        with contextlib.suppress(ConnectionError, OSError):
            await sender


async def _serve(target: tuple[str, int], delay: Delay, client_r, client_w) -> None:
    try:
        server_r, server_w = await asyncio.open_connection(*target)
    except OSError:
        client_w.close()
        return
    try:
        await asyncio.gather(
            _pipe(client_r, server_w, delay),
            _pipe(server_r, client_w, delay),
            return_exceptions=True,
        )
    finally:
        client_w.close()
        server_w.close()


async def main(listen: str, target: str, control: str) -> None:
    host, port = listen.rsplit(":", 1)
    to_host, to_port = target.rsplit(":", 1)
    delay = Delay(Path(control))
    server = await asyncio.start_server(
        lambda r, w: _serve((to_host, int(to_port)), delay, r, w), host, int(port)
    )
    print(f"relay listening on {listen}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
