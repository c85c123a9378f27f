"""The blocking SDK: `connect(url)` and the same verbs as the async one (exec_daemon/sdk/aio.py).

    sandbox = connect("http://127.0.0.1:8080")       # token: found as find_token says
    result = sandbox.shell.run("pytest -q", timeout=120, on_stdout=print)
    sandbox.files.edit("app.py", "old", "new")
    print(result.exit_code, sandbox.git.diff())
    sandbox.close()

Each Sandbox runs the async SDK on an event loop in a thread of its own; callbacks (on_stdout,
on_stderr, on_delta) are called on that thread. Interrupting a blocking call (Ctrl-C) aborts
the tool call on the daemon.
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import os
import threading
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Self, TypeVar

from google.protobuf.message import Message

from agent.v1.context_pb2 import GetAgentContextResponse, McpServerInfo
from agent.v1.control_pb2 import DirectoryEntry, PingResponse
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.sdk.aio import (
    DEFAULT_URL,
    MAX_TIMEOUT_SECONDS,
    AsyncCommandHandle,
    AsyncSandbox,
    AsyncTerminal,
    CommandOutput,
    DeltaCallback,
    OutputCallback,
)
from exec_daemon.sdk.results import CommandResult

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread; `run` blocks on one coroutine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="exec-daemon-sdk", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # Ctrl-C: the coroutine is cancelled (a tool call is aborted)
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10.0)
        if not self._thread.is_alive():
            self.loop.close()


# Sandboxes not closed yet. A script that ends without close() would otherwise exit with the
# HTTP client's runtime threads still calling back into a finalizing interpreter, which aborts
# the process (SIGABRT after the script's last line; cf. pyqwest issue #164).
_open_sandboxes: weakref.WeakSet[Sandbox] = weakref.WeakSet()


@atexit.register
def _close_open_sandboxes() -> None:
    for sandbox in list(_open_sandboxes):
        sandbox.close()


class Sandbox:
    """A connection to one daemon; made by `connect`. Namespaces: `shell`, `files`, `git`,
    `mcp`, `terminals`; `context()`, `call()`, `ping()`, `close()`. Use it in a `with` block, or
    call `close()`."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, **options: Any) -> None:
        self._loop = _LoopThread()

        async def make() -> AsyncSandbox:
            return AsyncSandbox(url, token, **options)

        try:
            self.aio = self._loop.run(make())
        except BaseException:
            self._loop.stop()
            raise
        _open_sandboxes.add(self)
        self.url = self.aio.url
        self.shell = Shell(self)
        self.files = Files(self)
        self.git = Git(self)
        self.mcp = Mcp(self)
        self.terminals = Terminals(self)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coro)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Ends the connection (calls still running are aborted by the daemon)."""
        _open_sandboxes.discard(self)
        if not self._loop.loop.is_closed():
            try:
                self._run(self.aio.close())
            finally:
                self._loop.stop()

    def ping(self) -> PingResponse:
        """The daemon's version, uptime, pid and workspace."""
        return self._run(self.aio.ping())

    def context(
        self, paths: Sequence[str] = (), *, agent_id: str | None = None
    ) -> GetAgentContextResponse:
        """The agent's rules, skills and subagent definitions for `paths` (GetAgentContext)."""
        return self._run(self.aio.context(paths, agent_id=agent_id))

    def call(
        self,
        tool_call: ToolCall | Message,
        *,
        agent_id: str | None = None,
        run_mode: int | str | None = None,
        on_delta: DeltaCallback | None = None,
        check: bool = True,
    ) -> Any:
        """Runs any tool call (a ToolCall, or a tool's args message such as ReadToolArgs) and
        returns its result's `success` case (a shell call's `success` or `failure`); with
        `check=False`, the whole result message. Other cases raise (exec_daemon/sdk/errors.py)."""
        return self._run(
            self.aio.call(
                tool_call, agent_id=agent_id, run_mode=run_mode, on_delta=on_delta, check=check
            )
        )


class Shell:
    """Shell commands: `run` one to its end, or `start` one and keep a handle on it."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def run(
        self,
        command: str,
        *,
        cwd: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        secret_env: Sequence[str] = (),
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        agent_id: str | None = None,
        run_mode: int | str | None = None,
    ) -> CommandResult:
        """Runs `command` in the agent's shell session (its directory and exported variables
        persist between calls) and returns how it ended; a non-zero exit code is a result, not
        an exception.

        cwd: the directory (relative to the workspace). timeout: seconds (the daemon's default
        is 30, its maximum 600); past it raises Timeout, with the output so far. env: variables
        for this command only (judged by the allowlist outside run_everything); secret_env:
        which of them are secrets (redacted from everything the daemon sends). on_stdout /
        on_stderr: called with each piece of output as it comes.
        Raises NeedsApproval, Rejected, Timeout, Aborted, ConnectionLost, ..."""
        return self._sandbox._run(
            self._sandbox.aio.shell.run(
                command,
                cwd=cwd,
                timeout=timeout,
                env=env,
                secret_env=secret_env,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
                agent_id=agent_id,
                run_mode=run_mode,
            )
        )

    def start(
        self,
        command: str,
        *,
        cwd: str | None = None,
        timeout: float | None = MAX_TIMEOUT_SECONDS,
        env: Mapping[str, str] | None = None,
        secret_env: Sequence[str] = (),
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        agent_id: str | None = None,
        run_mode: int | str | None = None,
    ) -> CommandHandle:
        """Starts `command` in a shell of its own with its stdin open and returns at once:
        `wait()`, `output()`, `write_stdin()`, `abort()`. The timeout defaults to 600 s."""
        handle = self._sandbox._run(
            self._sandbox.aio.shell.start(
                command,
                cwd=cwd,
                timeout=timeout,
                env=env,
                secret_env=secret_env,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
                agent_id=agent_id,
                run_mode=run_mode,
            )
        )
        return CommandHandle(self._sandbox, handle)


class CommandHandle:
    """A running shell command (shell.start): `wait()`, `output()`, `write_stdin()`, `abort()`."""

    def __init__(self, sandbox: Sandbox, handle: AsyncCommandHandle) -> None:
        self._sandbox = sandbox
        self.aio = handle

    @property
    def shell_id(self) -> int:
        return self.aio.shell_id

    @property
    def done(self) -> bool:
        return self.aio.done

    def output(self) -> CommandOutput:
        """What the command printed so far."""
        return self.aio.output()

    def wait(self, timeout: float | None = None) -> CommandResult:
        """How the command ended (raises as shell.run does). With `timeout`, raises
        TimeoutError if it has not ended by then (the command keeps running)."""

        async def waited() -> CommandResult:
            return await asyncio.wait_for(self.aio.wait(), timeout)

        return self._sandbox._run(waited())

    def write_stdin(self, data: str, *, close: bool = False) -> int:
        """Writes `data` to the command's stdin (then closes it when `close`)."""
        return self._sandbox._run(self.aio.write_stdin(data, close=close))

    def close_stdin(self) -> None:
        self._sandbox._run(self.aio.close_stdin())

    def abort(self) -> None:
        """Ends the command; `wait()` then raises Aborted."""
        self._sandbox._run(self.aio.abort())


class Files:
    """The workspace's files (paths relative to the workspace, or absolute)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox
        self._files = sandbox.aio.files

    def read(self, path: str) -> str:
        """The text of the file at `path` (in windows: any size)."""
        return self._sandbox._run(self._files.read(path))

    def read_bytes(self, path: str) -> bytes:
        """The bytes of the file at `path` (in windows: any size)."""
        return self._sandbox._run(self._files.read_bytes(path))

    def write(self, path: str, content: str | bytes) -> int:
        """Writes the whole file (creating it and its folders); returns the bytes written."""
        return self._sandbox._run(self._files.write(path, content))

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> Any:
        """Replaces `old` by `new` in the file; returns the EditSuccess (with its diff)."""
        return self._sandbox._run(self._files.edit(path, old, new, replace_all=replace_all))

    def list(self, path: str = ".") -> builtins.list[DirectoryEntry]:
        """The entries of the folder `path`."""
        return self._sandbox._run(self._files.list(path))

    def glob(self, pattern: str, path: str = "") -> builtins.list[str]:
        """The files matching the glob `pattern` under `path`, newest first."""
        return self._sandbox._run(self._files.glob(pattern, path))

    def grep(self, pattern: str, path: str = "", **options: Any) -> Any:
        """ripgrep's matches of `pattern` under `path` (GrepSuccess); options: GrepArgs fields."""
        return self._sandbox._run(self._files.grep(pattern, path, **options))

    def delete(self, path: str) -> None:
        """Deletes the file at `path`."""
        self._sandbox._run(self._files.delete(path))

    def upload(self, local_path: str | os.PathLike[str], path: str) -> int:
        """Copies the local file `local_path` to `path` on the daemon, in windows."""
        return self._sandbox._run(self._files.upload(local_path, path))

    def download(self, path: str, local_path: str | os.PathLike[str]) -> int:
        """Copies the daemon's file `path` to the local `local_path`, in windows."""
        return self._sandbox._run(self._files.download(path, local_path))


class Git:
    """The workspace repository's changes."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def diff(self, ref: str = "") -> str:
        """The unified diff of the workspace against `ref` (default HEAD)."""
        return self._sandbox._run(self._sandbox.aio.git.diff(ref))

    def changes_hash(self) -> str:
        """A hash of the workspace's uncommitted changes."""
        return self._sandbox._run(self._sandbox.aio.git.changes_hash())


class Mcp:
    """The MCP servers the daemon runs."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def tools(self) -> list[McpServerInfo]:
        """Every configured MCP server: its name, state, error and tools."""
        return self._sandbox._run(self._sandbox.aio.mcp.tools())


class Terminals:
    """Terminals (PTYs) on the daemon's PTY WebSocket port."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def open(
        self,
        command: str | None = None,
        *,
        cwd: str | None = None,
        cols: int = 80,
        rows: int = 24,
        name: str | None = None,
    ) -> Terminal:
        """A new terminal running `command` (default: the login shell in the workspace)."""
        opened = self._sandbox._run(
            self._sandbox.aio.terminals.open(command, cwd=cwd, cols=cols, rows=rows, name=name)
        )
        return Terminal(self._sandbox, opened)

    def attach(self, terminal_id: str, since: int | None = None) -> Terminal:
        """Attaches to a running terminal (replaying its output from byte `since`)."""
        return Terminal(
            self._sandbox,
            self._sandbox._run(self._sandbox.aio.terminals.attach(terminal_id, since)),
        )


class Terminal:
    """One attached terminal: `send()`, `read()`, `resize()`, `signal()`, `close()`."""

    def __init__(self, sandbox: Sandbox, terminal: AsyncTerminal) -> None:
        self._sandbox = sandbox
        self.aio = terminal

    @property
    def id(self) -> str:
        return self.aio.id

    @property
    def exit_code(self) -> int | None:
        return self.aio.exit_code

    def send(self, data: str | bytes) -> None:
        self._sandbox._run(self.aio.send(data))

    def read(self, timeout: float | None = None) -> bytes:
        """The next piece of output (b"" once closed); TimeoutError after `timeout` s."""
        return self._sandbox._run(self.aio.read(timeout))

    def resize(self, cols: int, rows: int) -> None:
        self._sandbox._run(self.aio.resize(cols, rows))

    def signal(self, name: str = "SIGINT") -> None:
        self._sandbox._run(self.aio.signal(name))

    def close(self) -> None:
        """Detaches (the terminal keeps running)."""
        self._sandbox._run(self.aio.close())


def connect(url: str = DEFAULT_URL, token: str | None = None, **options: Any) -> Sandbox:
    """Connects to the daemon at `url` (http:// assumed when no scheme is given) and checks the
    token with a Ping. `token`: when None, EXEC_DAEMON_AUTH_TOKEN, else the `.exec-daemon-token`
    file `./scripts/serve` keeps (in the current folder or one above it). Options: pty_url
    (default: the next port), agent_id, run_mode ("allowlist", ...), heartbeat_timeout,
    chunk_bytes. Raises Unauthenticated (no token, or a wrong one) or Unavailable."""
    sandbox = Sandbox(url, token, **options)
    try:
        sandbox.ping()
    except BaseException:
        sandbox.close()
        raise
    return sandbox
