"""shell_tool_call, write_shell_stdin_tool_call and await_tool_call."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time

from agent.v1.common_pb2 import ToolError
from agent.v1.shell_pb2 import (
    AwaitArgs,
    AwaitResult,
    AwaitSuccess,
    ShellArgs,
    ShellNotFound,
    ShellResult,
    ShellStarted,
    ShellToolCallDelta,
    WriteShellStdinArgs,
    WriteShellStdinResult,
    WriteShellStdinSuccess,
)
from agent.v1.tool_call_pb2 import ToolCallDelta
from exec_daemon.kernel.call_marks import CALL_MARK_VARIABLE
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.processes import Confinement
from exec_daemon.kernel.sandboxing import SandboxDecision, Sandboxing
from exec_daemon.kernel.spec import (
    Effect,
    HookEvents,
    Hooks,
    RunModeRule,
    Subject,
    ToolSpec,
    no_subject,
)
from tools.shell import results
from tools.shell.foreground import ForegroundCall
from tools.shell.jobs import ShellJob
from tools.shell.output import OutputCapture
from tools.shell.pipes import write_all
from tools.shell.service import ShellService
from tools.shell.session import (
    SessionStartError,
    ShellSession,
    command_env_script,
    os_reason,
    valid_env_name,
)
from tools.shell.watch import LogWatcher

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 600_000
STDIN_WRITE_SECONDS = 10.0
AWAIT_POLL_SECONDS = 0.05


def _timeout_problem(present: bool, value: int, name: str) -> str:
    if present and value == 0:
        return f"{name} must be between 1 and {MAX_TIMEOUT_MS} ms (leave it unset for the default {DEFAULT_TIMEOUT_MS})"
    if value > MAX_TIMEOUT_MS:
        return f"{name} {value} ms is above the maximum of {MAX_TIMEOUT_MS} ms"
    return ""


# ShellArgs.env, all names and values together: it travels in the session's request header.
MAX_ENV_BYTES = 64 * 1024


def env_problem(args: ShellArgs, redaction_enabled: bool) -> str:
    """Why the call's own variables (ShellArgs.env, secret_env) cannot be set, or ""."""
    size = 0
    for name, value in args.env.items():
        if not valid_env_name(name):
            return f"env: {name!r} is not a shell variable name"
        if name.startswith("__ed_") or name == CALL_MARK_VARIABLE:
            return f"env: {name} is the daemon's own variable"
        if "\0" in value:
            return f"env: the value of {name} contains a NUL character"
        size += len(name.encode()) + len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_ENV_BYTES:
        return f"env: {size} bytes of names and values, above the limit of {MAX_ENV_BYTES}"
    for name in args.secret_env:
        if name not in args.env:
            return f"secret_env: {name!r} is not a variable of env"
    if args.secret_env and not redaction_enabled:
        return "secret_env: the daemon redacts nothing (start it with --secret-redaction-enabled)"
    return ""


def resolve_directory(workspace: str, requested: str) -> tuple[str, str]:
    """(absolute directory, problem); relative paths are relative to the workspace."""
    if not requested:
        return "", ""
    path = os.path.normpath(os.path.join(workspace, os.path.expanduser(requested)))
    if not os.path.exists(path):
        return path, f"working directory {path} does not exist"
    if not os.path.isdir(path):
        return path, f"working directory {path} is not a directory"
    return path, ""


# ---------------------------------------------------------------------------------------------
# shell_tool_call


async def shell_tool_call(args: ShellArgs, ctx: CallContext) -> ShellResult:
    service = ctx.daemon.service(ShellService)
    terminals = service.terminals_path
    if not args.command.strip():
        return results.spawn_error(args, terminals, "empty command: there is nothing to run")
    if "\0" in args.command:
        return results.spawn_error(
            args, terminals, "the command contains a NUL character, which bash cannot run"
        )
    problem = _timeout_problem(args.HasField("timeout"), args.timeout, "timeout")
    if problem:
        return results.rejected(args, terminals, problem)
    problem = env_problem(args, ctx.daemon.config.secret_redaction_enabled)
    if problem:
        return results.rejected(args, terminals, problem)
    cwd, problem = resolve_directory(ctx.daemon.workspace, args.working_directory)
    if problem:
        return results.spawn_error(args, terminals, problem, cwd)
    decision = ctx.sandbox or await _sandbox_decision(args, ctx)
    if decision.refusal:
        return _sandbox_rejected(args, terminals, decision.refusal)
    result = await _run_shell(args, ctx, service, cwd, decision.confinement)
    if decision.effective_policy is not None:
        result.sandbox_policy.CopyFrom(decision.effective_policy)
    return result


async def _sandbox_decision(args: ShellArgs, ctx: CallContext) -> SandboxDecision:
    """The decision for a call no guard decided (e.g. a daemon assembled without them)."""
    policy = args.requested_sandbox_policy if args.HasField("requested_sandbox_policy") else None
    return await ctx.daemon.service(Sandboxing).decide(policy)


SHELL = ToolSpec(
    "shell_tool_call",
    shell_tool_call,
    effects=Effect.WORKSPACE | Effect.MACHINE,
    run_mode=RunModeRule.SHELL_ALLOWLIST,
    hooks=Hooks("Shell", claude_name="Bash", events=HookEvents.SHELL),
    subject=lambda args: Subject(command=args.command),
)


def _sandbox_rejected(args: ShellArgs, terminals: str, reason: str) -> ShellResult:
    result = results.rejected(args, terminals, reason)
    result.rejected.details.source = "sandbox"
    result.rejected.details.sandbox_unavailable = True
    return result


async def _run_shell(
    args: ShellArgs, ctx: CallContext, service: ShellService, cwd: str, confinement: Confinement
) -> ShellResult:
    terminals = service.terminals_path
    timeout_ms = args.timeout if args.HasField("timeout") else DEFAULT_TIMEOUT_MS
    session: ShellSession | None = None
    if not args.is_interactive and not args.is_background:
        try:
            session = await service.acquire_session(ctx.agent_id, confinement)
        except SessionStartError as exc:
            return results.spawn_error(args, terminals, str(exc), cwd)
    if args.is_background:
        result = await _start_background(args, ctx, service, cwd, confinement)
    elif session is not None:
        result = await _run_in_session(args, ctx, service, session, cwd, timeout_ms)
    else:
        result = await _run_one_shot(args, ctx, service, cwd, confinement, timeout_ms)
    # A shell beside the session starts from the session's state: degraded as it is.
    ran_in = session or service.session_of(ctx.agent_id, confinement)
    if ran_in is not None:
        result.degraded_note = ran_in.degraded_note
    return result


def _capture(service: ShellService, args: ShellArgs, shell_id: int) -> OutputCapture:
    return OutputCapture(args.file_output_threshold_bytes, lambda: service.spill_path(shell_id))


async def _run_in_session(
    args: ShellArgs,
    ctx: CallContext,
    service: ShellService,
    session: ShellSession,
    cwd: str,
    timeout_ms: int,
) -> ShellResult:
    capture = _capture(service, args, session.shell_id)
    call = ForegroundCall(ctx, capture, service.spawn_task)
    try:
        done = await session.submit(
            args.command,
            cwd,
            call.sink,
            service.env_script(session),
            service.pinned_script,
            command_env_script(args.env),
        )
    except BaseException:
        service.release_session(session)
        raise
    # The session takes its next command once this one has really ended (even if this call
    # is cancelled while waiting for that).
    done.add_done_callback(lambda _done: service.release_session(session))
    ending, status = await call.run(session, done, timeout_ms / 1000)
    return _finish(
        args,
        service,
        call,
        ending,
        status,
        session.shell_id,
        session.pid,
        cwd or session.cwd,
        timeout_ms,
    )


async def _run_one_shot(
    args: ShellArgs,
    ctx: CallContext,
    service: ShellService,
    cwd: str,
    confinement: Confinement,
    timeout_ms: int,
) -> ShellResult:
    call: ForegroundCall | None = None

    def sink(stream: str, data: bytes) -> None:
        assert call is not None
        call.sink(stream, data)

    try:
        job = await service.start_one_shot(
            agent_id=ctx.agent_id,
            command=args.command,
            working_directory=cwd,
            confinement=confinement,
            sink=sink,
            interactive=args.is_interactive,
            command_env=command_env_script(args.env),
        )
    except OSError as exc:
        log.warning("starting a shell failed: %s", exc)
        return results.spawn_error(
            args, service.terminals_path, f"bash could not be started: {os_reason(exc)}", cwd
        )
    call = ForegroundCall(ctx, _capture(service, args, job.shell_id), service.spawn_task)
    if args.is_interactive:
        started = ShellStarted(shell_id=job.shell_id, pid=job.pid)
        try:
            await ctx.emit(ToolCallDelta(shell_tool_call_delta=ShellToolCallDelta(started=started)))
        except BaseException:
            service.spawn_task(job.interrupt())
            raise
    assert job.done is not None
    ending, status = await call.run(job, job.done, timeout_ms / 1000)
    return _finish(args, service, call, ending, status, job.shell_id, job.pid, job.cwd, timeout_ms)


def _finish(
    args: ShellArgs,
    service: ShellService,
    call: ForegroundCall,
    ending: results.Ending,
    status: results.ExitStatus | None,
    shell_id: int,
    pid: int,
    cwd: str,
    timeout_ms: int,
) -> ShellResult:
    output = call.capture.finish()
    if output.spill_path:
        service.prune_spill_files()
    reason = ""
    if ending == "aborted":
        reason = "aborted: the command was ended (abort, disconnect or shutdown)"
    finished = results.FinishedCall(
        ending=ending,
        command=args.command,
        cwd=cwd,
        output=output,
        execution_ms=call.elapsed_ms(),
        shell_id=shell_id,
        pid=pid,
        status=status,
        timeout_ms=timeout_ms,
        reason=reason,
    )
    return results.finished(args, service.terminals_path, finished)


async def _start_background(
    args: ShellArgs, ctx: CallContext, service: ShellService, cwd: str, confinement: Confinement
) -> ShellResult:
    terminals = service.terminals_path
    try:
        job = await service.start_one_shot(
            agent_id=ctx.agent_id,
            command=args.command,
            working_directory=cwd,
            confinement=confinement,
            sink=lambda _stream, _data: None,
            background=True,
            command_env=command_env_script(args.env),
        )
    except OSError as exc:
        log.warning("starting a background shell failed: %s", exc)
        return results.spawn_error(
            args, terminals, f"bash could not be started: {os_reason(exc)}", cwd
        )
    return results.background_started(
        args, terminals, shell_id=job.shell_id, pid=job.pid, output_file=str(job.log_path or "")
    )


# ---------------------------------------------------------------------------------------------
# write_shell_stdin_tool_call


def _not_found(service: ShellService, shell_id: int) -> tuple[ShellNotFound | None, str]:
    """(not-found answer, or the problem with a session shell id)."""
    if service.find_session(shell_id) is not None:
        return None, (
            f"shell {shell_id} is an agent's session shell, whose commands run with stdin at "
            "EOF; start the command with is_interactive or is_background to talk to it"
        )
    return ShellNotFound(shell_id=shell_id, reason=f"no shell has id {shell_id}"), ""


async def write_shell_stdin(args: WriteShellStdinArgs, ctx: CallContext) -> WriteShellStdinResult:
    service = ctx.daemon.service(ShellService)
    job = service.jobs.get(args.shell_id)
    if job is None:
        not_found, problem = _not_found(service, args.shell_id)
        if not_found is not None:
            return WriteShellStdinResult(shell_not_found=not_found)
        return WriteShellStdinResult(error=ToolError(code="failed_precondition", message=problem))
    if not job.running:
        assert job.status is not None
        return WriteShellStdinResult(
            error=ToolError(
                code="failed_precondition",
                message=f"shell {job.shell_id} has exited (exit code {job.status.exit_code})",
            )
        )
    if job.stdin_fd is None:
        return WriteShellStdinResult(
            error=ToolError(
                code="failed_precondition",
                message=f"shell {job.shell_id} has no open stdin (it was closed, or the command "
                "was started neither interactive nor in the background)",
            )
        )
    data = args.chars.encode()
    try:
        written = await write_all(job.stdin_fd, data, STDIN_WRITE_SECONDS)
    except BrokenPipeError:
        job.close_stdin()
        return WriteShellStdinResult(
            error=ToolError(
                code="failed_precondition",
                message=f"shell {job.shell_id} no longer reads its stdin",
            )
        )
    if written < len(data):
        return WriteShellStdinResult(
            error=ToolError(
                code="unavailable",
                message=f"shell {job.shell_id} is not reading its stdin: wrote {written} of "
                f"{len(data)} bytes in {STDIN_WRITE_SECONDS:.0f}s",
            )
        )
    if args.close_stdin:
        job.close_stdin()
    return WriteShellStdinResult(
        success=WriteShellStdinSuccess(shell_id=job.shell_id, bytes_written=written)
    )


# ---------------------------------------------------------------------------------------------
# await_tool_call


WRITE_SHELL_STDIN = ToolSpec(
    "write_shell_stdin_tool_call",
    write_shell_stdin,
    effects=Effect.WORKSPACE | Effect.MACHINE,  # what it types, a shell runs
    # What it types is run by whatever reads it (an allowlisted interpreter, the editor or pager
    # an allowlisted command opens), which no allowlist judges: approval outside run_everything.
    run_mode=RunModeRule.NEEDS_APPROVAL,
    hooks=Hooks("WriteShellStdin"),
    subject=no_subject,
)


async def await_shell(args: AwaitArgs, ctx: CallContext) -> AwaitResult:
    service = ctx.daemon.service(ShellService)
    problem = _timeout_problem(False, args.timeout_ms, "timeout_ms")
    if problem:
        return AwaitResult(rejected={"reason": problem, "source": "invalid_argument"})
    timeout_ms = args.timeout_ms if args.HasField("timeout_ms") else DEFAULT_TIMEOUT_MS
    try:
        pattern = re.compile(args.pattern, re.MULTILINE) if args.pattern else None
    except re.error as exc:
        return AwaitResult(
            error=ToolError(code="invalid_argument", message=f"invalid pattern: {exc}")
        )
    job = service.jobs.get(args.shell_id)
    if job is None:
        not_found, problem = _not_found(service, args.shell_id)
        if not_found is not None:
            return AwaitResult(shell_not_found=not_found)
        return AwaitResult(error=ToolError(code="failed_precondition", message=problem))
    if pattern is not None and job.log_path is None:
        return AwaitResult(
            error=ToolError(
                code="failed_precondition",
                message=f"shell {job.shell_id} keeps no output log: only background and "
                "interactive shells can be awaited for a pattern",
            )
        )
    return AwaitResult(success=await _await_job(job, pattern, timeout_ms))


AWAIT = ToolSpec(
    "await_tool_call",
    await_shell,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Await"),
    subject=no_subject,
)


async def _await_job(
    job: ShellJob, pattern: re.Pattern[str] | None, timeout_ms: int
) -> AwaitSuccess:
    started = time.monotonic()
    deadline = started + timeout_ms / 1000
    watcher = LogWatcher(job.log_path) if job.log_path is not None else None
    matched = ""
    timed_out = False
    while True:
        ended = not job.running
        if pattern is not None and watcher is not None:
            found = await watcher.search(pattern)
            if found is not None:
                matched = found
                break
        if ended:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        wait = remaining if pattern is None else min(remaining, AWAIT_POLL_SECONDS)
        try:
            await asyncio.wait_for(job.ended.wait(), wait)
        except TimeoutError:
            pass
    status = job.status
    return AwaitSuccess(
        shell_id=job.shell_id,
        exited=status is not None,
        exit_code=status.exit_code if status is not None else 0,
        signal=status.signal if status is not None else "",
        matched=bool(matched),
        matched_text=matched,
        output_tail=await watcher.tail() if watcher is not None else "",
        timed_out=timed_out,
        waited_ms=int((time.monotonic() - started) * 1000),
    )
