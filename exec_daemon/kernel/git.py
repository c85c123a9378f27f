"""The one way the daemon runs git: hardened against a repository the agent can partly write.

The agent may write the workspace and most of `.git/` (objects, refs, index, HEAD; the protected
paths of tools/workspace.py keep it off config, hooks, info/, worktrees/, modules/,
config.worktree). The daemon runs git as root outside any sandbox, so nothing git can be made to
execute or read may come from a place the agent can write:

- Which repository: the nearest `.git` at or above the workspace, found by the daemon (on the
  workspace's file system, as git would) and then given to git explicitly. A `.git` directory
  is used with `GIT_COMMON_DIR` pinned to itself, so a planted `.git/commondir` is ignored (a
  main repository has none). A `.git` file (`gitdir:`, linked worktrees and submodule checkouts) is
  followed, and so is its target's `commondir`, only to directories outside the workspace; else
  a FAILED_PRECONDITION `CodedError`. A symbolic link `.git` is refused. `GIT_DIR`, `GIT_COMMON_DIR`,
  `GIT_WORK_TREE` and `GIT_CEILING_DIRECTORIES` are set explicitly, so no other `.git` is found.
  `core.worktree` is overridden by `GIT_WORK_TREE`. `objects/info/alternates` is honoured: it
  only adds objects, which the agent can write into `objects/` anyway, and runs nothing.
- Configuration: no system or global file (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`,
  no HOME or XDG directories), so only the repository's own config (and config.worktree) and
  the daemon's. A repository config with `include.path` / `includeIf` is refused: an include can
  name any file, including agent-written ones. Every key that makes git run a program is
  overridden at command scope (read last, so it wins); see `HARDENING`.
- Filter drivers (clean, smudge, process) are named by attributes, which the agent writes
  (`.gitattributes`), and defined in config: every driver the config defines is overridden
  with empty commands, which git treats as no filter. Diff drivers (external diff, textconv)
  are off by `--no-ext-diff --no-textconv` on every diff-producing command; merge drivers are
  never reached (the daemon does not merge).
- Submodules are not entered: `submodule.recurse=false`, `--ignore-submodules=dirty` on status
  and diff (a submodule's recorded commit still counts; its work tree is never examined, which
  is what would run its own git with its own config).
- Environment: a fixed allowlist built from the daemon's own environment, never the agent's
  (`UpdateEnvironmentVariables` or an `export` could otherwise set `GIT_DIR`,
  `GIT_CONFIG_PARAMETERS`, `GIT_EXTERNAL_DIFF`, `GIT_SSH_COMMAND`, ...).

Not reached by the daemon's commands, so not overridden: keys only network transports read
(core.gitProxy, remote.<name>.uploadpack/receivepack, core.alternateRefsCommand; gh pushes over
https), merge drivers, `!` aliases (git never lets an alias shadow the builtins the daemon
runs), and keys git reads only from system or global config (uploadpack.packObjectsHook,
trace2.*), which are not read at all.

`run_git` builds the command line and environment, and `_execute` runs it (killed with its
process group on timeout or cancellation, output bounded): swapping `_execute` for the general
helper runner is the one change needed to share it.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.runner import PIPE, read_bounded, start_helper

TIMEOUT_SECONDS = 60.0
MAX_OUTPUT_BYTES = 256 * 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Command-scope settings that keep git from running anything it was not asked to run. Each is a
# key of git-config(1) whose value is a program (or turns one on) that the daemon's commands
# (rev-parse, status, diff, add, ls-files, config; gh's remote, push) could reach.
HARDENING: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),  # a hook program, or the fsmonitor daemon
    ("core.hooksPath", "/dev/null"),  # post-index-change (git add), pre-push (gh), ...
    ("core.sshCommand", ""),
    ("core.askPass", ""),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.attributesFile", "/dev/null"),
    ("credential.helper", ""),  # an empty value clears every helper configured before it
    ("protocol.ext.allow", "never"),  # ext:: URLs run a command
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "dirty"),
    ("status.submoduleSummary", "false"),
    ("log.showSignature", "false"),  # would run gpg.program
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("gc.auto", "0"),  # no automatic gc (and its pre-auto-gc hook)
    ("maintenance.auto", "false"),
    ("color.ui", "false"),
)
# A filter driver whose commands are empty filters nothing (convert.c skips an empty command).
_FILTER_OVERRIDES = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
# Subcommands that can show a diff: external diff and textconv programs are turned off there.
_DIFF_COMMANDS = frozenset({"diff", "log", "show", "diff-index", "diff-files", "diff-tree"})
_SUBMODULE_COMMANDS = frozenset({"diff", "status"})
_INCLUDE_KEY = re.compile(r"^(include\.path|includeif\..*\.path)$")
_FILTER_KEY = re.compile(r"^filter\.(.+)\.[^.]+$")


def git_refused(message: str) -> CodedError:
    """The repository's layout points where the daemon does not trust; the message says where."""
    return CodedError(ErrorCode.FAILED_PRECONDITION, message)


@dataclass(frozen=True)
class GitRepository:
    """A repository the daemon checked: its work tree (the workspace or a folder above), git dir
    and common dir (config, objects, refs: the git dir itself unless a linked worktree)."""

    work_tree: str
    git_dir: str
    common_dir: str


@dataclass
class GitRun:
    returncode: int
    stdout: bytes
    stderr: str


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _read_pointer(path: str, prefix: str = "") -> str:
    """The path a `.git` file (`gitdir: X`) or a `commondir` file names, resolved relative to
    the file's folder."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as file:
            text = file.read(4096).strip()
    except OSError as exc:
        raise git_refused(f"cannot read {path}: {exc.strerror}") from None
    if not text.startswith(prefix):
        raise git_refused(f"{path} does not start with {prefix!r}")
    named = text.removeprefix(prefix).strip()
    return os.path.realpath(os.path.join(os.path.dirname(path), named))


def _trusted_directory(path: str, workspace: str, named_by: str) -> str:
    if _inside(path, workspace):
        raise git_refused(
            f"{named_by} points inside the workspace ({path}), where the agent can write: "
            "the daemon does not use that repository"
        )
    if not os.path.isdir(path):
        raise git_refused(f"{named_by} points at {path}, which is not a directory")
    return path


def _find_dot_git(workspace: str) -> str | None:
    """The nearest `.git` at or above the workspace, on its file system, as git finds it: a
    directory without HEAD (e.g. the sandbox's empty placeholder) does not count."""
    folder = workspace
    device = os.stat(folder).st_dev
    while True:
        candidate = os.path.join(folder, ".git")
        if os.path.lexists(candidate) and (
            not os.path.isdir(candidate) or os.path.lexists(os.path.join(candidate, "HEAD"))
        ):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder or os.stat(parent).st_dev != device:
            return None
        folder = parent


def locate_repository(workspace: str) -> GitRepository | None:
    """The repository the workspace is in (its own `.git` or the nearest one above it),
    checked; None when there is none.

    Blocking (a few stats and small reads): call it in a thread from async code."""
    workspace = os.path.realpath(workspace)
    dot_git = _find_dot_git(workspace)
    if dot_git is None:
        return None
    work_tree = os.path.dirname(dot_git)
    if os.path.islink(dot_git):
        raise git_refused(f"{dot_git} is a symbolic link: the daemon does not follow it")
    if os.path.isdir(dot_git):
        # A planted `commondir` in a main repository is ignored: GIT_COMMON_DIR pins it.
        return GitRepository(work_tree, dot_git, dot_git)
    git_dir = _trusted_directory(_read_pointer(dot_git, "gitdir:"), workspace, dot_git)
    commondir = os.path.join(git_dir, "commondir")
    common_dir = git_dir
    if os.path.lexists(commondir):
        common_dir = _trusted_directory(_read_pointer(commondir), workspace, commondir)
    return GitRepository(work_tree, git_dir, common_dir)


def _base_environment(repository: GitRepository | None) -> dict[str, str]:
    if repository is None:
        # No repository: git answers "not a git repository" instead of finding one.
        where = {"GIT_DIR": os.devnull}
    else:
        where = {
            "GIT_DIR": repository.git_dir,
            "GIT_COMMON_DIR": repository.common_dir,
            "GIT_WORK_TREE": repository.work_tree,
            "GIT_CEILING_DIRECTORIES": os.path.dirname(repository.work_tree),
        }
    return where | {
        # The daemon's own PATH (the operator's), not the agent's.
        "PATH": os.environ.get("PATH", DEFAULT_PATH),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_SYSTEM": os.devnull,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
    }


def config_variables(entries: Sequence[tuple[str, str]]) -> dict[str, str]:
    """`entries` as git's GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n variables
    (command scope, like `-c`, but without quoting rules)."""
    variables = {"GIT_CONFIG_COUNT": str(len(entries))}
    for index, (key, value) in enumerate(entries):
        variables[f"GIT_CONFIG_KEY_{index}"] = key
        variables[f"GIT_CONFIG_VALUE_{index}"] = value
    return variables


# Command-scope configuration of every git the agent's shells run (sandboxed or not, allowlisted
# or approved), re-set at the start of each call: a repository the agent lays out (a bare one:
# HEAD, config, objects/, refs/ written by the file tools) is used only when git is pointed at it
# explicitly, and programs a repository's configuration names are not run (fsmonitor, hooks,
# pager, editor, ext:: transports). Not the person's terminals: they keep their hooks.
AGENT_GIT_CONFIG: tuple[tuple[str, str], ...] = (
    ("safe.bareRepository", "explicit"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("protocol.ext.allow", "never"),
)


def agent_git_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The GIT_CONFIG_COUNT / _KEY_n / _VALUE_n variables of the agent's shells: those of `env`
    (the operator's), then AGENT_GIT_CONFIG, read last so it wins."""
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    entries = [
        (env.get(f"GIT_CONFIG_KEY_{index}", ""), env.get(f"GIT_CONFIG_VALUE_{index}", ""))
        for index in range(max(count, 0))
    ]
    return config_variables([*(e for e in entries if e[0]), *AGENT_GIT_CONFIG])


# Filter overrides per repository, keyed by the identity of its config files.
_overrides_cache: dict[tuple[object, ...], tuple[tuple[str, str], ...]] = {}
_OVERRIDES_CACHE_SIZE = 32
_RACY_NANOSECONDS = 2_000_000_000


def _config_identity(repository: GitRepository) -> tuple[object, ...] | None:
    """What identifies the config files' contents; None while one changed too recently for its
    timestamps to tell a second change (like git's racy index entries)."""
    identity: list[object] = [repository.common_dir, repository.git_dir]
    for path in (
        os.path.join(repository.common_dir, "config"),
        os.path.join(repository.git_dir, "config.worktree"),
    ):
        try:
            info = os.stat(path)
        except OSError:
            identity.append(None)
            continue
        if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < _RACY_NANOSECONDS:
            return None
        identity.append(
            (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        )
    return tuple(identity)


def _overrides_from_listing(listing: bytes, repository: GitRepository) -> list[tuple[str, str]]:
    overrides: list[tuple[str, str]] = []
    drivers: set[str] = set()
    for record in listing.split(b"\0"):
        key = record.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        if _INCLUDE_KEY.match(key):
            raise git_refused(
                f"the configuration of {repository.common_dir} includes other files ({key}), "
                "which may be written by the agent: the daemon does not run git there"
            )
        match = _FILTER_KEY.match(key)
        if match and match.group(1) not in drivers:
            drivers.add(match.group(1))
            overrides += [
                (f"filter.{match.group(1)}.{name}", value) for name, value in _FILTER_OVERRIDES
            ]
    return overrides


async def _driver_overrides(repository: GitRepository) -> tuple[tuple[str, str], ...]:
    """Command-scope entries that empty every filter driver the repository's config defines,
    after checking it includes no other file."""
    identity = await asyncio.to_thread(_config_identity, repository)
    cached = _overrides_cache.get(identity) if identity is not None else None
    if cached is not None:
        return cached
    env = _base_environment(repository) | config_variables(HARDENING)
    argv = command_line("config", ["--list", "-z"])
    run = await _execute(argv, repository.work_tree, env, TIMEOUT_SECONDS, MAX_STDERR_BYTES * 16)
    if run.returncode != 0:
        raise git_refused(
            f"git cannot read the configuration of {repository.common_dir}: {run.stderr[:300]}"
        )
    overrides = tuple(_overrides_from_listing(run.stdout, repository))
    if identity is not None:
        if len(_overrides_cache) >= _OVERRIDES_CACHE_SIZE:
            _overrides_cache.clear()
        _overrides_cache[identity] = overrides
    return overrides


async def git_environment(
    repository: GitRepository | None,
    extra_config: Sequence[tuple[str, str]] = (),
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment for a git (or a program that runs git, like gh) in `repository`
    (None: there is none, and git must not find one).

    `extra_config` comes after the hardening, so it can add settings (gh's credential helper
    for github.com) or override one of ours; `extra_env` is added as is (GIT_INDEX_FILE)."""
    overrides = await _driver_overrides(repository) if repository is not None else ()
    entries = [*HARDENING, *overrides, *extra_config]
    return _base_environment(repository) | config_variables(entries) | dict(extra_env or {})


def command_line(subcommand: str, args: Sequence[str]) -> list[str]:
    """git's argv: the subcommand's own safety options first, so later ones from the caller
    (trusted daemon code) still apply."""
    argv = ["git", "--no-pager", subcommand]
    if subcommand in _DIFF_COMMANDS:
        argv += ["--no-ext-diff", "--no-textconv"]
    if subcommand in _SUBMODULE_COMMANDS:
        argv.append("--ignore-submodules=dirty")
    return argv + list(args)


async def run_git(
    repository: GitRepository,
    subcommand: str,
    *args: str,
    cwd: str | None = None,
    config: Sequence[tuple[str, str]] = (),
    env: Mapping[str, str] | None = None,
    seconds: float = TIMEOUT_SECONDS,
    max_output: int | None = MAX_OUTPUT_BYTES,
) -> GitRun:
    """Runs `git subcommand args` hardened in `repository`, in `cwd` (default: its work tree;
    pathspecs are relative to it).

    Raises CodedError: FAILED_PRECONDITION (the configuration includes files), DEADLINE_EXCEEDED,
    RESOURCE_EXHAUSTED (more output than `max_output`)."""
    environment = await git_environment(repository, config, env)
    argv = command_line(subcommand, args)
    return await _execute(argv, cwd or repository.work_tree, environment, seconds, max_output)


async def _execute(
    argv: list[str], cwd: str, env: dict[str, str], seconds: float, max_output: int | None
) -> GitRun:
    """Runs argv as a helper (exec_daemon/kernel/runner.py: its own session, no stdin), stdout
    kept up to `max_output` bytes: more is a RESOURCE_EXHAUSTED, and git is ended at once, as
    on timeout and cancellation."""
    helper = await start_helper(argv, env=env, cwd=cwd, stdout=PIPE, stderr=PIPE)
    process = helper.process
    stderr_task = asyncio.ensure_future(read_bounded(process.stderr, MAX_STDERR_BYTES))
    try:
        async with asyncio.timeout(seconds):
            stdout = await _read_at_most(process.stdout, max_output)
            if stdout is None:
                raise CodedError(
                    ErrorCode.RESOURCE_EXHAUSTED,
                    f"git {argv[2]} wrote more than {max_output} bytes (the message size limit)",
                )
            returncode = await process.wait()
            stderr = await stderr_task
    except TimeoutError:
        raise CodedError(
            ErrorCode.DEADLINE_EXCEEDED, f"git {argv[2]} took longer than {seconds:g} s"
        ) from None
    finally:
        stderr_task.cancel()
        await helper.stop(grace=0)
    return GitRun(returncode, stdout, stderr.data.decode("utf-8", "replace").strip())


async def _read_at_most(stream: asyncio.StreamReader | None, limit: int | None) -> bytes | None:
    """Everything until EOF; None as soon as it is more than `limit` bytes."""
    assert stream is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(1 << 20):
        size += len(chunk)
        if limit is not None and size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
