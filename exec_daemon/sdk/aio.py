"""The async SDK: `await connect_async(url)` and the same verbs as the sync one (exec_daemon/sdk/
sync.py), each awaited.

    sandbox = await connect_async("http://127.0.0.1:8080")   # token: found as find_token says
    result = await sandbox.shell.run("pytest -q", timeout=120, env={"CI": "1"})
    await sandbox.files.edit("app.py", "old", "new")
    print(result.exit_code, await sandbox.git.diff())
    await sandbox.close()

Tool calls go over one ExecStream, opened on first use and opened again after it drops: calls
running when it dropped fail with ConnectionLost (never hang: a stream that sends nothing, not
even its heartbeats, for `heartbeat_timeout` seconds counts as dropped); the next call
reconnects. Every RPC carries the token.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import inspect
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote, urlencode, urlsplit

import websockets
from connectrpc.errors import ConnectError
from google.protobuf.message import Message
from websockets.asyncio.client import ClientConnection

from agent.v1 import files_pb2 as files_pb
from agent.v1.common_pb2 import RunMode
from agent.v1.context_pb2 import (
    GetAgentContextRequest,
    GetAgentContextResponse,
    ListMcpToolsRequest,
    McpServerInfo,
)
from agent.v1.control_pb2 import (
    DirectoryEntry,
    GetDiffRequest,
    GetWorkspaceChangesHashRequest,
    ListDirectoryRequest,
    PingRequest,
    PingResponse,
    ReadBinaryFileRequest,
    ReadTextFileRequest,
    WriteBinaryFileRequest,
    WriteTextFileRequest,
)
from agent.v1.shell_pb2 import (
    ShellArgs,
    ShellResult,
    ShellToolCall,
    WriteShellStdinArgs,
)
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta
from exec_daemon.client import (
    ExecDaemonClient,
    ExecStream,
    StreamCall,
    StreamEndedError,
    TokenNotFound,
    find_token,
)
from exec_daemon.sdk.errors import (
    ConnectionLost,
    ExecDaemonError,
    InvalidArgument,
    NotFound,
    Unauthenticated,
    Unavailable,
)
from exec_daemon.sdk.results import (
    VARIANT_OF_ARGS,
    CommandResult,
    case_error,
    command_result,
    outcome_result,
    rpc_error,
)

DEFAULT_URL = "http://127.0.0.1:8080"
# Files move in windows of this size (the daemon takes messages up to 64 MiB by default).
CHUNK_BYTES = 4 * 1024 * 1024
# The daemon heartbeats every 15 s on an ExecStream (--heartbeat-seconds).
HEARTBEAT_TIMEOUT_SECONDS = 60.0
# shell.start's timeout when none is given: the daemon's maximum (ShellArgs.timeout).
MAX_TIMEOUT_SECONDS = 600.0
RUN_MODES = {
    "run_everything": RunMode.RUN_MODE_RUN_EVERYTHING,
    "allowlist": RunMode.RUN_MODE_ALLOWLIST,
    "auto_review": RunMode.RUN_MODE_AUTO_REVIEW,
}

OutputCallback = Callable[[str], Any]
DeltaCallback = Callable[[ToolCallDelta], Any]


def with_scheme(url: str) -> str:
    """`url`, with http:// in front when it names no scheme (`127.0.0.1:8080`)."""
    return url if "://" in url else f"http://{url}"


def default_pty_url(url: str) -> str:
    """The PTY WebSocket server beside the RPC port at `url`: the next port (8080 -> 8081)."""
    parts = urlsplit(with_scheme(url))
    secure = parts.scheme == "https"
    port = (parts.port or (443 if secure else 80)) + 1
    host = parts.hostname or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"{'wss' if secure else 'ws'}://{host}:{port}"


def run_mode_value(run_mode: int | str | None) -> int:
    """A RunMode from its number or its name ("allowlist"); None: the daemon's --run-mode."""
    if run_mode is None:
        return RunMode.RUN_MODE_UNSPECIFIED
    if isinstance(run_mode, str):
        try:
            return RUN_MODES[run_mode]
        except KeyError:
            raise InvalidArgument(f"run_mode {run_mode!r}: one of {sorted(RUN_MODES)}") from None
    return int(run_mode)


def as_tool_call(call: ToolCall | Message) -> ToolCall:
    """`call` itself, or the ToolCall around an args message (ShellArgs, ReadToolArgs, ...)."""
    if isinstance(call, ToolCall):
        return call
    variant = VARIANT_OF_ARGS.get(call.DESCRIPTOR.full_name)
    if variant is None:
        raise InvalidArgument(
            f"{call.DESCRIPTOR.full_name} is neither a ToolCall nor a tool's args"
        )
    wrapped = ToolCall()
    getattr(wrapped, variant).args.CopyFrom(call)
    return wrapped


async def _called(callback: Callable[[Any], Any] | None, value: Any) -> None:
    if callback is not None:
        returned = callback(value)
        if inspect.isawaitable(returned):
            await returned


class AsyncSandbox:
    """A connection to one daemon; made by `connect_async`. Namespaces: `shell`, `files`, `git`,
    `mcp`, `terminals`; `context()`, `call()`, `ping()`, `close()`. Use it as an async context
    manager, or call `close()`."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        pty_url: str | None = None,
        agent_id: str = "",
        run_mode: int | str | None = None,
        heartbeat_timeout: float = HEARTBEAT_TIMEOUT_SECONDS,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        try:
            self.token = find_token(token)
        except TokenNotFound as exc:
            raise Unauthenticated(str(exc)) from None
        self.url = with_scheme(url)
        self.pty_url = pty_url or default_pty_url(self.url)
        self.agent_id = agent_id
        self.run_mode = run_mode_value(run_mode)
        self.heartbeat_timeout = heartbeat_timeout
        self.chunk_bytes = chunk_bytes
        self.client = ExecDaemonClient(self.url, self.token)
        self._stream: ExecStream | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._stream_lock = asyncio.Lock()
        self.shell = AsyncShell(self)
        self.files = AsyncFiles(self)
        self.git = AsyncGit(self)
        self.mcp = AsyncMcp(self)
        self.terminals = AsyncTerminals(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Ends the stream (calls still running are aborted by the daemon) and the connection."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stream.close(), 5.0)
        await self.client.close()

    # -- RPCs ---------------------------------------------------------------------------------

    async def rpc(self, method: Callable[..., Awaitable[Any]], request: Message) -> Any:
        """One unary ControlService RPC (`sandbox.client.control.<rpc>`), its errors typed."""
        try:
            return await method(request)
        except ConnectError as exc:
            raise rpc_error(exc) from None

    async def ping(self) -> PingResponse:
        """The daemon's version, uptime, pid and workspace."""
        answer: PingResponse = await self.rpc(self.client.control.ping, PingRequest())
        return answer

    async def context(
        self, paths: Sequence[str] = (), *, agent_id: str | None = None
    ) -> GetAgentContextResponse:
        """The agent's rules, skills and subagent definitions for `paths` (GetAgentContext)."""
        request = GetAgentContextRequest(
            paths=list(paths), agent_id=self.agent_id if agent_id is None else agent_id
        )
        answer: GetAgentContextResponse = await self.rpc(
            self.client.control.get_agent_context, request
        )
        return answer

    # -- tool calls ---------------------------------------------------------------------------

    async def _current_stream(self) -> ExecStream:
        async with self._stream_lock:
            stream = self._stream
            if stream is None or stream.ended.is_set():
                if stream is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(stream.close(), 1.0)
                stream = ExecStream(self.client)
                await stream.__aenter__()
                self._stream = stream
                if self._watchdog is not None:
                    self._watchdog.cancel()
                self._watchdog = asyncio.create_task(self._watch(stream))
            return stream

    async def _watch(self, stream: ExecStream) -> None:
        """Drops `stream` when the daemon has been silent longer than heartbeat_timeout."""
        loop = asyncio.get_running_loop()
        while not stream.ended.is_set():
            await asyncio.sleep(min(5.0, self.heartbeat_timeout / 4))
            silent = loop.time() - stream.last_message_at
            if silent > self.heartbeat_timeout:
                stream.drop(f"no word from the daemon for {silent:.0f} s")
                return

    async def start_call(
        self,
        tool_call: ToolCall | Message,
        *,
        agent_id: str | None = None,
        run_mode: int | str | None = None,
    ) -> RunningCall:
        """Starts one tool call on the stream; `RunningCall.answer()` waits for its result."""
        stream = await self._current_stream()
        started = await stream.start(
            as_tool_call(tool_call),
            agent_id=self.agent_id if agent_id is None else agent_id,
            run_mode=self.run_mode if run_mode is None else run_mode_value(run_mode),
        )
        return RunningCall(stream, started)

    async def call(
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
        `check=False`, the whole result message. Other cases raise (errors.py)."""
        running = await self.start_call(tool_call, agent_id=agent_id, run_mode=run_mode)
        result = await running.answer(on_delta)
        if not check:
            return result
        case = result.WhichOneof("result")
        if case is None:
            return result  # a background shell's start: no case is set
        if case == "success" or (case == "failure" and isinstance(result, ShellResult)):
            return getattr(result, case)
        raise case_error(result)


class RunningCall:
    """A tool call in flight on the stream."""

    def __init__(self, stream: ExecStream, call: StreamCall) -> None:
        self.stream = stream
        self.call = call

    @property
    def id(self) -> int:
        return self.call.id

    async def answer(self, on_delta: DeltaCallback | None = None) -> Message:
        """The result message, once the call answered (deltas go to `on_delta` meanwhile).
        Cancelled (e.g. by a timeout around it), the call is aborted on the daemon."""
        try:
            async for message in self.call:
                if message.WhichOneof("message") == "tool_call_delta":
                    await _called(on_delta, message.tool_call_delta)
        except StreamEndedError as exc:
            raise ConnectionLost(str(exc)) from None
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await self.abort()
            raise
        return outcome_result(self.call.outcome)

    async def abort(self) -> None:
        if not self.stream.ended.is_set():
            await self.stream.abort(self.call.id)


@dataclass(frozen=True)
class CommandOutput:
    """What a command printed so far."""

    stdout: str
    stderr: str


class AsyncShell:
    """Shell commands: `run` one to its end, or `start` one and keep a handle on it."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sandbox = sandbox

    @staticmethod
    def _args(
        command: str,
        cwd: str | None,
        timeout: float | None,
        env: Mapping[str, str] | None,
        secret_env: Sequence[str],
        interactive: bool,
    ) -> ShellArgs:
        args = ShellArgs(
            command=command,
            working_directory=cwd or "",
            env=dict(env or {}),
            secret_env=list(secret_env),
            is_interactive=interactive,
        )
        if timeout is not None:
            args.timeout = max(1, round(timeout * 1000))
        return args

    async def run(
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
        on_stderr: called with each piece of output as it comes (plain or async functions).
        Raises NeedsApproval, Rejected, Timeout, Aborted, ConnectionLost, ..."""
        handle = await self._start(
            command, cwd, timeout, env, secret_env, on_stdout, on_stderr, agent_id, run_mode, False
        )
        return await handle.wait()

    async def start(
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
    ) -> AsyncCommandHandle:
        """Starts `command` in a shell of its own (from the session's state) with its stdin
        open, and returns at once: `wait()`, `output()`, `write_stdin()`, `abort()`. The
        timeout defaults to the daemon's maximum, 600 s."""
        return await self._start(
            command, cwd, timeout, env, secret_env, on_stdout, on_stderr, agent_id, run_mode, True
        )

    async def _start(
        self,
        command: str,
        cwd: str | None,
        timeout: float | None,
        env: Mapping[str, str] | None,
        secret_env: Sequence[str],
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
        agent_id: str | None,
        run_mode: int | str | None,
        interactive: bool,
    ) -> AsyncCommandHandle:
        args = self._args(command, cwd, timeout, env, secret_env, interactive)
        running = await self._sandbox.start_call(
            ToolCall(shell_tool_call=ShellToolCall(args=args)), agent_id=agent_id, run_mode=run_mode
        )
        return AsyncCommandHandle(self._sandbox, running, on_stdout, on_stderr, agent_id, run_mode)


class AsyncCommandHandle:
    """A running shell command (shell.start): `wait()`, `output()`, `write_stdin()`, `abort()`."""

    def __init__(
        self,
        sandbox: AsyncSandbox,
        running: RunningCall,
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
        agent_id: str | None,
        run_mode: int | str | None,
    ) -> None:
        self._sandbox = sandbox
        self._running = running
        self._on = {"stdout": on_stdout, "stderr": on_stderr}
        self._printed: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._agent_id = agent_id
        self._run_mode = run_mode
        self._started = asyncio.Event()
        self.shell_id = 0
        self.pid = 0
        self._answer = asyncio.ensure_future(self._follow())
        # Seen here, a failure nobody waits for is not reported as "never retrieved".
        self._answer.add_done_callback(lambda done: done.cancelled() or done.exception())

    async def _follow(self) -> CommandResult:
        try:
            result = await self._running.answer(self._on_delta)
        finally:
            self._started.set()
        assert isinstance(result, ShellResult)
        return command_result(result)

    async def _on_delta(self, delta: ToolCallDelta) -> None:
        if delta.WhichOneof("delta") != "shell_tool_call_delta":
            return
        shell = delta.shell_tool_call_delta
        kind = shell.WhichOneof("delta")
        if kind == "started":
            self.shell_id, self.pid = shell.started.shell_id, shell.started.pid
            self._started.set()
        elif kind in ("stdout", "stderr"):
            text = getattr(shell, kind)
            self._printed[kind].append(text)
            await _called(self._on[kind], text)

    @property
    def done(self) -> bool:
        return self._answer.done()

    def output(self) -> CommandOutput:
        """What the command printed so far (as streamed; the result holds the final text)."""
        return CommandOutput("".join(self._printed["stdout"]), "".join(self._printed["stderr"]))

    async def wait(self) -> CommandResult:
        """How the command ended (raises as shell.run does)."""
        return await asyncio.shield(self._answer)

    async def write_stdin(self, data: str, *, close: bool = False) -> int:
        """Writes `data` to the command's stdin (then closes it when `close`); returns the
        bytes written. Only for commands from shell.start."""
        await self._started.wait()
        if self.done or not self.shell_id:
            await self.wait()  # raises how the call ended
            raise NotFound("the command has ended: its stdin is closed")
        args = WriteShellStdinArgs(shell_id=self.shell_id, chars=data, close_stdin=close)
        written = await self._sandbox.call(args, agent_id=self._agent_id, run_mode=self._run_mode)
        return int(written.bytes_written)

    async def close_stdin(self) -> None:
        """Closes the command's stdin: it reads end-of-file."""
        await self.write_stdin("", close=True)

    async def abort(self) -> None:
        """Ends the command (its processes get SIGTERM, then SIGKILL); `wait()` then raises
        Aborted."""
        await self._running.abort()


class AsyncFiles:
    """The workspace's files (paths relative to the workspace, or absolute)."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sandbox = sandbox

    @property
    def _control(self) -> Any:
        return self._sandbox.client.control

    async def read(self, path: str) -> str:
        """The text of the file at `path` (in windows: any size)."""
        parts: list[str] = []
        offset = 0
        while True:
            window = await self._sandbox.rpc(
                self._control.read_text_file,
                ReadTextFileRequest(path=path, offset=offset, length=self._sandbox.chunk_bytes),
            )
            parts.append(window.content)
            if window.eof or window.next_offset <= offset:
                return "".join(parts)
            offset = window.next_offset

    async def read_bytes(self, path: str) -> bytes:
        """The bytes of the file at `path` (in windows: any size)."""
        return b"".join([chunk async for chunk in self._chunks(path)])

    async def _chunks(self, path: str) -> AsyncIterator[bytes]:
        offset = 0
        while True:
            window = await self._sandbox.rpc(
                self._control.read_binary_file,
                ReadBinaryFileRequest(path=path, offset=offset, length=self._sandbox.chunk_bytes),
            )
            yield window.data
            offset += len(window.data)
            if window.eof or not window.data:
                return

    async def write(self, path: str, content: str | bytes) -> int:
        """Writes the whole file (creating it and its folders); returns the bytes written.
        Larger than one window, it is sent in windows (the file grows window by window)."""
        data = content.encode() if isinstance(content, str) else content
        if isinstance(content, str) and len(data) <= self._sandbox.chunk_bytes:
            written = await self._sandbox.rpc(
                self._control.write_text_file, WriteTextFileRequest(path=path, content=content)
            )
            return int(written.bytes_written)
        return await self._write_chunks(path, _windows(data, self._sandbox.chunk_bytes))

    async def _write_chunks(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        total = 0
        first = True
        async for chunk in chunks:
            if chunk or first:
                await self._sandbox.rpc(
                    self._control.write_binary_file,
                    WriteBinaryFileRequest(path=path, data=chunk, append=not first),
                )
                total += len(chunk)
                first = False
        if first:
            await self._sandbox.rpc(
                self._control.write_binary_file, WriteBinaryFileRequest(path=path, data=b"")
            )
        return total

    async def upload(self, local_path: str | os.PathLike[str], path: str) -> int:
        """Copies the local file `local_path` to `path` in the daemon's workspace, in windows;
        returns the bytes sent."""
        return await self._write_chunks(path, _local_chunks(Path(local_path), self._sandbox))

    async def download(self, path: str, local_path: str | os.PathLike[str]) -> int:
        """Copies the daemon's file `path` to the local `local_path`, in windows; returns the
        bytes received."""
        total = 0
        with await asyncio.to_thread(Path(local_path).open, "wb") as local:
            async for chunk in self._chunks(path):
                await asyncio.to_thread(local.write, chunk)
                total += len(chunk)
        return total

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> Any:
        """Replaces `old` by `new` in the file (each occurrence with `replace_all`, else the
        only one); returns the EditSuccess (lines added/removed, the diff). No match, or several
        without replace_all, raises ToolFailed (code "no_match" / "multiple_matches")."""
        args = files_pb.EditArgs(path=path, old_string=old, new_string=new, replace_all=replace_all)
        return await self._sandbox.call(args)

    async def list(self, path: str = ".") -> builtins.list[DirectoryEntry]:
        """The entries of the folder `path` (name, is_directory, size, modified_ms, mode)."""
        answer = await self._sandbox.rpc(
            self._control.list_directory, ListDirectoryRequest(path=path)
        )
        return list(answer.entries)

    async def glob(self, pattern: str, path: str = "") -> builtins.list[str]:
        """The files matching the glob `pattern` under `path` (default: the workspace), newest
        first."""
        args = files_pb.GlobToolArgs(glob_pattern=pattern, target_directory=path)
        found = await self._sandbox.call(args)
        return list(found.files)

    async def grep(self, pattern: str, path: str = "", **options: Any) -> Any:
        """ripgrep's matches of the regular expression `pattern` under `path`: the GrepSuccess
        (`matches` per file; `files` or `counts` with output_mode="files_with_matches" or
        "count"). `options` are GrepArgs fields (glob, case_insensitive, context, type, ...).
        A bad pattern raises InvalidArgument."""
        return await self._sandbox.call(files_pb.GrepArgs(pattern=pattern, path=path, **options))

    async def delete(self, path: str) -> None:
        """Deletes the file at `path` (a missing one raises NotFound)."""
        await self._sandbox.call(files_pb.DeleteArgs(path=path))


async def _windows(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, max(len(data), 1), size):
        yield data[start : start + size]


async def _local_chunks(path: Path, sandbox: AsyncSandbox) -> AsyncIterator[bytes]:
    with await asyncio.to_thread(path.open, "rb") as local:
        while chunk := await asyncio.to_thread(local.read, sandbox.chunk_bytes):
            yield chunk


class AsyncGit:
    """The workspace repository's changes."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sandbox = sandbox

    async def diff(self, ref: str = "") -> str:
        """The unified diff of the workspace against `ref` (default HEAD), untracked files
        included."""
        answer = await self._sandbox.rpc(
            self._sandbox.client.control.get_diff, GetDiffRequest(ref=ref)
        )
        return str(answer.diff)

    async def changes_hash(self) -> str:
        """A hash of the workspace's uncommitted changes: equal hashes, same changes."""
        answer = await self._sandbox.rpc(
            self._sandbox.client.control.get_workspace_changes_hash,
            GetWorkspaceChangesHashRequest(),
        )
        return str(answer.hash)


class AsyncMcp:
    """The MCP servers the daemon runs."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sandbox = sandbox

    async def tools(self) -> list[McpServerInfo]:
        """Every configured MCP server: its name, state, error and tools (ListMcpTools)."""
        answer = await self._sandbox.rpc(
            self._sandbox.client.control.list_mcp_tools, ListMcpToolsRequest()
        )
        return list(answer.servers)


class AsyncTerminals:
    """Terminals (PTYs) on the daemon's PTY WebSocket port."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sandbox = sandbox

    async def open(
        self,
        command: str | None = None,
        *,
        cwd: str | None = None,
        cols: int = 80,
        rows: int = 24,
        name: str | None = None,
    ) -> AsyncTerminal:
        """A new terminal running `command` (default: the login shell in the workspace)."""
        query: dict[str, str | int] = {"cols": cols, "rows": rows}
        for key, value in (("command", command), ("cwd", cwd), ("name", name)):
            if value is not None:
                query[key] = value
        return await self._connect(f"/terminals/new?{urlencode(query)}")

    async def attach(self, terminal_id: str, since: int | None = None) -> AsyncTerminal:
        """Attaches to a running terminal (replaying its output from byte `since`)."""
        suffix = f"?since={since}" if since is not None else ""
        return await self._connect(f"/terminals/{quote(terminal_id, safe='')}{suffix}")

    async def _connect(self, path: str) -> AsyncTerminal:
        headers = {"authorization": f"Bearer {self._sandbox.token}"}
        try:
            socket = await websockets.connect(
                self._sandbox.pty_url + path, additional_headers=headers, max_size=None
            )
        except websockets.InvalidStatus as exc:
            code = "unauthenticated" if exc.response.status_code == 401 else "unavailable"
            kind = Unauthenticated if code == "unauthenticated" else Unavailable
            raise kind(f"PTY server: HTTP {exc.response.status_code}", code=code) from None
        except OSError as exc:
            raise Unavailable(f"PTY server {self._sandbox.pty_url}: {exc}") from None
        terminal = AsyncTerminal(socket)
        await terminal._attached()
        return terminal


class AsyncTerminal:
    """One attached terminal: `send()` input, `read()` / iterate output, `resize()`,
    `signal()`, `close()`; `exit_code` once its process ended."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._output: asyncio.Queue[bytes] = asyncio.Queue()
        self._attached_info: asyncio.Future[dict[str, Any]] = (
            asyncio.get_running_loop().create_future()
        )
        self.id = ""
        self.cols = 0
        self.rows = 0
        self.exit_code: int | None = None
        self.closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _attached(self) -> None:
        info = await asyncio.wait_for(asyncio.shield(self._attached_info), 30.0)
        self.id, self.cols, self.rows = str(info["id"]), info.get("cols", 0), info.get("rows", 0)

    async def _read(self) -> None:
        try:
            async for frame in self._socket:
                if isinstance(frame, bytes):
                    self._output.put_nowait(frame)
                    continue
                try:
                    control = json.loads(frame)
                except ValueError:
                    self._output.put_nowait(frame.encode())
                    continue
                kind = control.get("type")
                if kind == "attached" and not self._attached_info.done():
                    self._attached_info.set_result(control)
                elif kind == "exit":
                    self.exit_code = int(control.get("code", 0))
                elif kind == "size":
                    self.cols, self.rows = control.get("cols", 0), control.get("rows", 0)
        except websockets.ConnectionClosed:
            pass
        finally:
            if not self._attached_info.done():
                self._attached_info.set_exception(
                    NotFound(f"the terminal closed before attaching: {self._socket.close_reason}")
                )
                self._attached_info.exception()
            self.closed.set()
            self._output.put_nowait(b"")

    async def send(self, data: str | bytes) -> None:
        """Types `data` into the terminal."""
        await self._socket.send(data.encode() if isinstance(data, str) else data)

    async def read(self, timeout: float | None = None) -> bytes:
        """The next piece of output (b"" once the terminal closed). Raises TimeoutError after
        `timeout` seconds without output."""
        chunk = await asyncio.wait_for(self._output.get(), timeout)
        if not chunk:
            self._output.put_nowait(b"")  # every later read sees the end too
        return chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while chunk := await self.read():
            yield chunk

    async def resize(self, cols: int, rows: int) -> None:
        await self._socket.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    async def signal(self, name: str = "SIGINT") -> None:
        """Sends a signal (SIGINT, SIGTERM, ...) to the terminal's process group."""
        await self._socket.send(json.dumps({"type": "signal", "signal": name}))

    async def close(self) -> None:
        """Detaches (the terminal keeps running; `attach` finds it again)."""
        await self._socket.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


async def connect_async(
    url: str = DEFAULT_URL,
    token: str | None = None,
    **options: Any,
) -> AsyncSandbox:
    """Connects to the daemon at `url` (http:// assumed when no scheme is given) and checks the
    token with a Ping. `token`: when None, EXEC_DAEMON_AUTH_TOKEN, else the `.exec-daemon-token`
    file `./scripts/serve` keeps (in the current folder or one above it). Options:
    pty_url (default: the next port), agent_id, run_mode ("allowlist", ...: the calls' run mode;
    default the daemon's --run-mode), heartbeat_timeout, chunk_bytes.
    Raises Unauthenticated (no token, or a wrong one) or Unavailable (no daemon there)."""
    sandbox = AsyncSandbox(url, token, **options)
    try:
        await sandbox.ping()
    except BaseException:
        await sandbox.close()
        raise
    return sandbox


__all__ = [
    "AsyncCommandHandle",
    "AsyncSandbox",
    "AsyncTerminal",
    "CommandOutput",
    "CommandResult",
    "ExecDaemonError",
    "RunningCall",
    "connect_async",
]
