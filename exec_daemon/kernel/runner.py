"""The one way the daemon runs its own helper programs: rg, gh, linters, ffmpeg, Xvfb, xdotool,
hooks (agent commands go through `exec_daemon.kernel.processes.spawn()`).

Every helper
- leads a new session, hence its own process group, with no controlling terminal;
- gets the environment its caller passes (the agent's, `daemon.env.snapshot()`, so
  UpdateEnvironmentVariables reaches it) minus the daemon's secrets (`kernel/secrets.py`);
- reads /dev/null unless given input;
- is ended with everything in its session (and what left it carrying its mark,
  `kernel/call_marks.py`) on timeout or cancellation, and (run to completion) with what it left
  in its group once it exited.

A helper that parses what the agent supplied (ffmpeg on an attached video) is given the
sandbox's `Confinement` for it (`exec_daemon/kernel/sandboxing.py`'s ISOLATED demand) and starts
through the one spawn path, `processes.spawn()`.

Two shapes: `run_helper` runs to completion, its output kept up to a limit (what was cut is
counted); `start_helper` starts one that the caller keeps (Xvfb, a recording ffmpeg) and ends
with `Helper.stop()`. Failing to start or to finish in time raises `HelperFailed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from exec_daemon.kernel.call_marks import CALL_MARK_VARIABLE, marked, new_call_mark
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.processes import (
    UNCONFINED,
    Child,
    Confinement,
    Selector,
    SpawnSpec,
    in_sessions,
    signal_selected,
    spawn,
)
from exec_daemon.kernel.secrets import without_secrets

DEFAULT_OUTPUT_LIMIT = 1 << 20
DEFAULT_GRACE_SECONDS = 1.0
# A helper that exited may leave a child holding its pipes: its output gets this long to end.
PIPE_GRACE_SECONDS = 0.5
_READ_BYTES = 65536
_POLL_SECONDS = 0.005

PIPE = asyncio.subprocess.PIPE
DEVNULL = asyncio.subprocess.DEVNULL
# What a helper's stdin/stdout/stderr may be: PIPE, DEVNULL, an fd or a file.
Stream = int | IO[Any] | None


class HelperFailed(CodedError):
    """A helper could not be started (UNAVAILABLE) or did not finish in time (TIMEOUT)."""


# How long a stopped helper's pipes are read to their end, at most.
DISCARD_SECONDS = 5.0


@dataclass(frozen=True)
class Output:
    """What a helper wrote to one stream: the first `limit` bytes, and how many more were cut."""

    data: bytes
    cut: int = 0

    def text(self) -> str:
        """The kept bytes as text, ending with a note of what was cut, if anything."""
        text = self.data.decode("utf-8", "replace")
        return f"{text}\n[{self.cut} more bytes cut]" if self.cut else text


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: Output
    stderr: Output


def helper_name(argv: Sequence[str]) -> str:
    return os.path.basename(argv[0]) if argv else "helper"


@dataclass
class Helper(Child):
    """A started helper, the leader of its own session."""

    name: str = "helper"
    mark: str = ""

    def _strays(self) -> Selector:
        """Its session, and what left it (setsid, double fork) but carries its mark."""
        session = in_sessions({self.pid}, since_ticks=self.started_ticks)
        escaped = marked(self.mark, since_ticks=self.started_ticks)
        return lambda info: session(info) or escaped(info)

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.pid, sig)

    def _group_gone(self) -> bool:
        """Its leader was reaped and no process is left in its group (no /proc scan: cheap)."""
        if self.process.returncode is None:
            return False
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False

    def kill_now(self) -> None:
        """SIGKILL to its group, every process left in its session and any that carries its mark,
        without awaiting."""
        self._signal_group(signal.SIGKILL)
        signal_selected(self._strays(), signal.SIGKILL)

    async def stop(self, grace: float = DEFAULT_GRACE_SECONDS) -> int:
        """Ends it and its group: SIGTERM, then SIGKILL (to the group and whatever is left in
        its session) after `grace` seconds. Returns its exit status."""
        if not self._group_gone():
            self._signal_group(signal.SIGTERM)
            self._signal_group(signal.SIGCONT)
        deadline = time.monotonic() + grace
        while not self._group_gone():
            if time.monotonic() >= deadline:
                self.kill_now()
                break
            await asyncio.sleep(_POLL_SECONDS)
        # Python 3.11's Process.wait() answers only once every pipe reached its end, and a pipe
        # whose unread output filled the reader's buffer is paused: it never would.
        await _discard_rest(self.process.stdout, self.process.stderr)
        try:
            return await asyncio.shield(self.process.wait())
        except asyncio.CancelledError:
            self.kill_now()
            raise


async def _discard_rest(*streams: asyncio.StreamReader | None) -> None:
    """Reads what is left of `streams` (a dead group's pipes: at most the pipe's buffer) to
    their end, for at most DISCARD_SECONDS (a process outside the group may still hold one)."""

    async def discard(stream: asyncio.StreamReader) -> None:
        # RuntimeError: the caller still reads it itself (and so it is not stuck).
        with contextlib.suppress(RuntimeError, OSError):
            while await stream.read(1 << 16):
                pass

    readers = [discard(stream) for stream in streams if stream is not None]
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DISCARD_SECONDS):
            await asyncio.gather(*readers)


async def start_helper(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    stdin: Stream = None,
    stdout: Stream = None,
    stderr: Stream = None,
    pass_fds: Sequence[int] = (),
    confinement: Confinement = UNCONFINED,
) -> Helper:
    """Starts `argv` in a session of its own, under `confinement`; None for a stream means
    /dev/null.

    Raises HelperFailed(UNAVAILABLE) when it cannot be started (missing, not executable, or the
    confinement could not be set up: its reason is in the message)."""
    name = helper_name(argv)
    mark = new_call_mark()
    spec = SpawnSpec(
        argv=tuple(argv),
        cwd=os.getcwd() if cwd is None else cwd,
        env={**without_secrets(env), CALL_MARK_VARIABLE: mark},
        stdin=_stream_fd(stdin),
        stdout=_stream_fd(stdout),
        stderr=_stream_fd(stderr),
        pass_fds=tuple(pass_fds),
    )
    try:
        child = await spawn(spec, confinement)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise HelperFailed(ErrorCode.UNAVAILABLE, f"{name} cannot be started ({why})") from None
    return Helper(process=child.process, started_ticks=child.started_ticks, name=name, mark=mark)


def _stream_fd(stream: Stream) -> int | None:
    """A stream as SpawnSpec takes it: an fd, PIPE, or None for /dev/null."""
    if stream is None or stream == DEVNULL:
        return None
    return stream if isinstance(stream, int) else stream.fileno()


async def read_bounded(stream: asyncio.StreamReader | None, limit: int) -> Output:
    """Everything until EOF, keeping the first `limit` bytes and counting the rest."""
    if stream is None:
        return Output(b"")
    kept = bytearray()
    cut = 0
    while chunk := await stream.read(_READ_BYTES):
        room = limit - len(kept)
        kept += chunk[:room]
        cut += max(0, len(chunk) - room)
    return Output(bytes(kept), cut)


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    if stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.close()


def _result(task: asyncio.Future[Output]) -> Output:
    return task.result() if task.done() and not task.cancelled() else Output(b"")


async def run_helper(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    time_limit: float,
    cwd: str | None = None,
    input: bytes | None = None,
    limit: int = DEFAULT_OUTPUT_LIMIT,
    stderr_limit: int = DEFAULT_OUTPUT_LIMIT,
    pass_fds: Sequence[int] = (),
    confinement: Confinement = UNCONFINED,
) -> Completed:
    """Runs `argv` to its end, at most `time_limit` seconds; whatever it leaves running is ended.

    Raises HelperFailed: UNAVAILABLE when it cannot be started, TIMEOUT when it outlived
    `time_limit` (it and its session are then ended). A non-zero exit is no failure here: the
    caller reads `Completed.returncode`."""
    helper = await start_helper(
        argv,
        env=env,
        cwd=cwd,
        stdin=None if input is None else PIPE,
        stdout=PIPE,
        stderr=PIPE,
        pass_fds=pass_fds,
        confinement=confinement,
    )
    process = helper.process
    readers = [
        asyncio.ensure_future(read_bounded(process.stdout, limit)),
        asyncio.ensure_future(read_bounded(process.stderr, stderr_limit)),
    ]
    try:
        async with asyncio.timeout(time_limit):
            if input is not None:
                await _feed(process.stdin, input)
            await process.wait()
        await asyncio.wait(readers, timeout=PIPE_GRACE_SECONDS)
    except TimeoutError:
        await helper.stop(grace=0)
        raise HelperFailed(
            ErrorCode.TIMEOUT, f"{helper.name} did not finish within {time_limit:g} s"
        ) from None
    except BaseException:
        helper.kill_now()
        with contextlib.suppress(BaseException):
            await asyncio.shield(process.wait())
        raise
    finally:
        for reader in readers:
            reader.cancel()
    # Children it left behind (still holding its pipes, or not) end with it.
    await helper.stop(grace=0)
    return Completed(process.returncode or 0, _result(readers[0]), _result(readers[1]))
