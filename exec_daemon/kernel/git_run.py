"""How the daemon runs git for itself (diffs, change hashes, reports, lints): in the workspace,
never prompting, never taking locks, with bounded output and time."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.state import Daemon

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
GIT_TIMEOUT_SECONDS = 60.0


@dataclass
class GitRun:
    returncode: int
    stdout: bytes
    stderr: str


def git_env(daemon: Daemon, **extra: str) -> dict[str, str]:
    env = daemon.env.snapshot()
    env.update({"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **extra})
    return env


async def run_git(
    daemon: Daemon, *args: str, env: dict[str, str] | None = None, max_output: int | None = None
) -> GitRun:
    """Runs git in the workspace. Output beyond `max_output` bytes is a RESOURCE_EXHAUSTED."""
    process = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=daemon.workspace,
        env=env or git_env(daemon),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    stderr_task = asyncio.create_task(process.stderr.read())
    try:
        async with asyncio.timeout(GIT_TIMEOUT_SECONDS):
            chunks: list[bytes] = []
            size = 0
            while chunk := await process.stdout.read(1 << 20):
                size += len(chunk)
                if max_output is not None and size > max_output:
                    raise CodedError(
                        ErrorCode.RESOURCE_EXHAUSTED,
                        f"the output is larger than {max_output} bytes (the message size limit)",
                    )
                chunks.append(chunk)
            stderr = await stderr_task
            returncode = await process.wait()
    except TimeoutError:
        raise CodedError(ErrorCode.DEADLINE_EXCEEDED, f"git {args[0]} took too long") from None
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        stderr_task.cancel()
    return GitRun(returncode, b"".join(chunks), stderr.decode("utf-8", "replace").strip())
