"""Non-blocking pipe plumbing on the event loop (no threads, no StreamReader buffering)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

# Larger reads only make larger short-lived buffers (the pipes themselves hold 1 MiB).
READ_BYTES = 256 << 10


class PipeReader:
    """Reads a pipe as data arrives and hands every chunk to `on_data`; `on_eof` once at the end.

    `drain()` reads synchronously whatever the pipe holds right now, so a caller that learned a
    command ended can collect its last output before answering.
    """

    def __init__(
        self,
        fd: int,
        on_data: Callable[[bytes], None],
        on_eof: Callable[[], None] | None = None,
    ) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self.on_data = on_data
        self._on_eof = on_eof
        self._loop = asyncio.get_running_loop()
        self._reading = False
        self.closed = False
        self.eof = asyncio.Event()
        self.resume()

    def pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self.fd)
            self._reading = False

    def resume(self) -> None:
        if not self._reading and not self.closed:
            self._loop.add_reader(self.fd, self._read_once)
            self._reading = True

    def _read_once(self) -> bool:
        """Reads one chunk; False when the pipe is empty for now or ended."""
        if self.closed:
            return False
        try:
            data = os.read(self.fd, READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            data = b""
        if not data:
            self._end()
            return False
        self.on_data(data)
        return True

    def drain(self) -> None:
        while self._read_once():
            pass

    def _end(self) -> None:
        self.close()
        self.eof.set()
        if self._on_eof is not None:
            self._on_eof()

    def close(self) -> None:
        if self.closed:
            return
        self.pause()
        self.closed = True
        with contextlib.suppress(OSError):
            os.close(self.fd)


async def write_all(fd: int, data: bytes, wait_seconds: float) -> int:
    """Writes `data` to a non-blocking pipe, waiting while it is full; returns bytes written.

    Raises BrokenPipeError when the reader is gone; returns short after `wait_seconds`.
    """
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    written = 0
    deadline = loop.time() + wait_seconds
    while written < len(data):
        try:
            written += os.write(fd, view[written:])
            continue
        except BlockingIOError:
            pass
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_writer(fd, _set_ready, ready)
        try:
            await asyncio.wait_for(ready, remaining)
        except TimeoutError:
            break
        finally:
            loop.remove_writer(fd)
    return written


def _set_ready(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
