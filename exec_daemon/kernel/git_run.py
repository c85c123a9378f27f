"""How the daemon runs git for itself in the workspace (diffs, change hashes, reports, lints):
hardened (exec_daemon/kernel/git.py), never prompting, with bounded output and time."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from exec_daemon.kernel import git
from exec_daemon.kernel.state import Daemon

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
GIT_TIMEOUT_SECONDS = 60.0


async def workspace_repository(daemon: Daemon) -> git.GitRepository | None:
    """The workspace's repository as the daemon's git uses it; None outside one. A layout
    pointing where the agent can write is a FAILED_PRECONDITION `CodedError`."""
    return await asyncio.to_thread(git.locate_repository, daemon.workspace)


async def run_git(
    daemon: Daemon,
    *args: str,
    config: Sequence[tuple[str, str]] = (),
    index_file: str | None = None,
    max_output: int | None = git.MAX_OUTPUT_BYTES,
) -> git.GitRun:
    """Runs git, hardened, in the workspace's repository; outside one, a failed run (as git's
    own "not a git repository"). Raises CodedError: FAILED_PRECONDITION, DEADLINE_EXCEEDED,
    RESOURCE_EXHAUSTED (output beyond `max_output` bytes)."""
    repository = await workspace_repository(daemon)
    if repository is None:
        return git.GitRun(128, b"", "fatal: the workspace is not a git repository")
    env = {"GIT_INDEX_FILE": index_file} if index_file else None
    return await git.run_git(
        repository,
        *args,
        cwd=daemon.workspace,
        config=config,
        env=env,
        seconds=GIT_TIMEOUT_SECONDS,
        max_output=max_output,
    )
