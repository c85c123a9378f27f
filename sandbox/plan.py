"""Turns an effective policy into the confinement helper's command line (see helper.c).

What a confined command gets:
- Landlock: read (and execute) everywhere, or, for a policy with `readable` (a helper that
  gets its input as a descriptor), only there and the files of the descriptors passed in;
  read-write on the writable set
  (exec_daemon/kernel/writable.py, the one the file tools follow): the workspace
  (`workspace_readwrite`), the additional read-write paths, the build caches and the temp dirs
  (/tmp, /var/tmp, /dev/shm, $TMPDIR) unless `disable_tmp_write`; writes to a few device files
  (/dev/null, /dev/tty, ...). A home folder inside those areas is mounted read-only (but for
  the areas inside it, bound read-write again).
- Mounts: the protected paths read-only (placeholders where missing, so they cannot be
  created); additional read-only paths inside writable areas read-only; the workspace itself
  read-only for `workspace_readonly` when it lies inside a writable area (e.g. under /tmp);
  the workspace, its ancestors inside writable areas and `.git` pinned (a mount point cannot be
  renamed away and replaced by a lookalike the daemon would then use).
- Build caches (`workspace_readwrite`, sandbox/caches.py): the folders of the grant writable
  (pinned where they lie in a writable area) and its variables set.
- Network (seccomp + namespaces): `none` allows only unix sockets (abstract ones scoped by
  Landlock ABI >= 6, pathname ones bound outside hidden); `proxy` adds TCP sockets in a private
  network namespace whose only way out is the daemon's proxy on 127.0.0.1:3128; `full` is the
  host's network.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from exec_daemon.kernel.paths import read_config_text
from exec_daemon.kernel.writable import writable_set
from sandbox.caches import CacheGrant
from sandbox.placeholders import MARK as PLACEHOLDER_MARK
from sandbox.policy import EffectivePolicy, NetworkMode, SandboxRejected, SandboxType
from sandbox.protected import ProtectedTarget, protected_targets

PROXY_PORT = 3128
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
PROXY_VARIABLES = (
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
)
NO_PROXY_VARIABLES = ("no_proxy", "NO_PROXY")
WRITABLE_DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
)
# What running a system program reads (ISOLATED_INPUT_ONLY): the dynamic loader and its
# configuration, the libraries and the programs (merged /usr or not), their data under /usr.
PROGRAM_READS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
)
# Where X servers bind their socket files (the daemon's and the desktop's bind none: they listen
# on abstract sockets only, which Landlock scopes).
X11_SOCKETS = "/tmp/.X11-unix"


@dataclass
class Plan:
    options: list[str] = field(default_factory=list)
    # Set in the command's environment / removed from it.
    env: dict[str, str] = field(default_factory=dict)
    unset_env: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    def apply_env(self, env: Mapping[str, str]) -> dict[str, str]:
        result = {k: v for k, v in env.items() if k not in self.unset_env}
        result.update(self.env)
        return result


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


class _Mounts:
    """Mount operations in the order the helper must apply them."""

    def __init__(self) -> None:
        self.pins: dict[str, None] = {}
        self.read_only: dict[str, str] = {}  # path -> helper option
        self.writable: dict[str, None] = {}

    def options(self) -> list[str]:
        result: list[str] = []
        for path in sorted(self.pins, key=_depth):
            result += ["--pin", path]
        for path in sorted(self.read_only, key=_depth):
            result += [self.read_only[path], path]
        for path in sorted(self.writable, key=_depth):
            result += ["--rw-bind", path]
        return result


def build_plan(
    policy: EffectivePolicy,
    workspace: Path | str,
    cwd: Path | str,
    *,
    env: Mapping[str, str],
    ctl_fd: int | None = None,
    keep_fds: Sequence[int] = (),
    mount_proc: bool = True,
    limit_processes: bool = True,
    targets: tuple[ProtectedTarget, ...] | None = None,
    private: Sequence[str] = (),
    outside: Sequence[str] = (),
    own: Sequence[str] = (),
    caches: CacheGrant | None = None,
    secrets: Sequence[str] = (),
    homes: Sequence[str] = (),
    masked: Sequence[str] = (),
) -> Plan:
    """The helper options for `policy`. Raises SandboxRejected when it cannot be enforced.

    `private`: the daemon's own directories (e.g. shell state that unconfined shells source):
    read-only inside. `outside`: real paths (the protected home and system paths, the declared
    ones): read-only where they lie in a writable area (elsewhere Landlock keeps them so; checked by name
    first, which keeps the usual case free of file system calls). `own`: paths the confined
    process itself must write (e.g. its shell's state directory): writable whatever the policy
    says. `caches`: the build caches (sandbox/caches.py), for `workspace_readwrite` only.
    `secrets`: files the command must not read (the token file), hidden under /dev/null.
    `homes`: the real home folders, carved out of the writable areas that hold them (the
    writable set: exec_daemon/kernel/writable.py).
    `masked`: the daemon's folders of sockets, under an empty read-only mount whatever is bound
    in them later. /tmp/.X11-unix gets an empty writable one: no X server of the host, started
    before or after the sandbox, is reachable by its socket file.
    `private` and `masked` folders inside a writable area have every folder on the way there
    pinned (a sandboxed command cannot rename one and put a link or a lookalike in its place).
    """
    plan = Plan()
    root = os.path.realpath(workspace)
    own_paths = [os.path.realpath(path) for path in own if os.path.exists(path)]
    extra: list[str] = list(own_paths)
    caches = caches if policy.type == SandboxType.WORKSPACE_READWRITE else None
    if caches is not None:
        extra += caches.writable
        plan.notes += caches.notes
    read_write = policy.type == SandboxType.WORKSPACE_READWRITE
    if read_write:
        for path in policy.readwrite_paths:
            if os.path.exists(path):
                extra.append(path)
            else:
                plan.notes.append(f"additional read-write path {path} does not exist (ignored)")
    granted = writable_set(
        root if read_write else None,
        extra,
        temp=not policy.disable_tmp_write,
        env=env,
        homes=homes,
    )
    readwrite = list(granted.all_areas)

    def writable(path: str) -> bool:
        return any(_under(path, area) for area in readwrite)

    mounts = _Mounts()
    _pin_renamable(root, writable, mounts)
    for folder in caches.writable if caches is not None else ():
        _pin_renamable(folder, writable, mounts)
    if writable(root):
        if policy.type != SandboxType.WORKSPACE_READWRITE:
            mounts.read_only[root] = "--ro"
        else:
            _protect_workspace(root, policy, writable, mounts, targets or protected_targets())
    daemon_folders = [os.path.realpath(path) for path in private]
    for real in [*map(os.path.realpath, policy.readonly_paths), *daemon_folders]:
        if os.path.exists(real) and writable(real):
            mounts.read_only.setdefault(real, "--ro")
    for real in [*daemon_folders, *map(os.path.realpath, masked)]:
        if writable(real) and os.path.isdir(real):
            _pin_renamable(real, writable, mounts)
    areas = set(readwrite)
    below = tuple(area.rstrip("/") + "/" for area in areas)
    for path in outside:
        if (path in areas or path.startswith(below)) and os.path.exists(path):
            mounts.read_only.setdefault(path, "--ro")
    # A home in a writable area (HOME under /tmp) is not: read-only, but for the areas in it.
    for home in granted.carved:
        mounts.read_only[home] = "--ro"
    for area in granted.inner_areas():
        mounts.writable[area] = None
    for path in own_paths:
        if any(_under(path, area) for area in mounts.read_only):
            mounts.writable[path] = None

    mode = policy.network.mode
    options = ["--net", mode.value, "--cwd", os.path.abspath(cwd)]
    if limit_processes:
        options += ["--max-processes", str(policy.max_processes)]
    else:
        plan.notes.append(
            f"maxProcesses ({policy.max_processes}) is not enforced here: the daemon runs as root,"
            " which RLIMIT_NPROC does not bind, and no pids cgroup can be created"
        )
    if mode == NetworkMode.PROXY:
        options += ["--proxy-port", str(PROXY_PORT)]
    if ctl_fd is not None:
        options += ["--ctl-fd", str(ctl_fd)]
    for fd in keep_fds:
        options += ["--keep-fd", str(fd)]
    if not mount_proc:
        options.append("--no-proc")
    for area in dict.fromkeys(readwrite):
        options += ["--rw", area]
    for device in WRITABLE_DEVICES:
        options += ["--dev-rw", device]
    if policy.readable is not None:
        options.append("--listed-reads")
        for path in policy.readable:
            options += ["--read", path]
        for fd in keep_fds:
            options += ["--read-fd", str(fd)]
    plan.options = options + mounts.options()
    for secret in secrets:
        # Readable by the sandbox's user, but not its content (/dev/null over it), nor linkable.
        plan.options += ["--hide", secret]
    for folder in masked:
        plan.options += ["--mask", folder]
    if os.path.isdir(X11_SOCKETS) and not os.path.islink(X11_SOCKETS):
        plan.options += ["--mask-tmp", X11_SOCKETS]

    plan.env = {"CURSOR_SANDBOX": "native", "CURSOR_ORIG_UID": str(os.getuid())}
    if caches is not None:
        plan.env.update(caches.env)
    if mode == NetworkMode.PROXY:
        plan.env.update(dict.fromkeys(PROXY_VARIABLES, PROXY_URL))
        plan.unset_env = NO_PROXY_VARIABLES
    return plan


def _pin_renamable(root: str, writable: Callable[[str], bool], mounts: _Mounts) -> None:
    """Pins the workspace and each ancestor that sits in a writable directory."""
    path = Path(root)
    for candidate in [*reversed(path.parents), path]:
        text = str(candidate)
        if text != "/" and writable(str(candidate.parent)):
            mounts.pins[text] = None


def _protect_workspace(
    root: str,
    policy: EffectivePolicy,
    writable: Callable[[str], bool],
    mounts: _Mounts,
    targets: tuple[ProtectedTarget, ...],
) -> None:
    git = os.path.join(root, ".git")
    git_dirs = _git_dirs(git, policy, mounts)
    for target in targets:
        if target.relative == ".git":
            continue  # `.git` itself: _git_dirs above
        if target.relative.startswith(".git/"):
            inside = target.relative.removeprefix(".git/")
            for git_dir in git_dirs:
                path = os.path.join(git_dir, inside)
                if not writable(path) or any(_under(other, path) for other in git_dirs):
                    # The workspace's own linked-worktree directory (in the common dir's
                    # `worktrees/`) must stay writable; its own targets are protected one by one.
                    continue
                if target.kind == "existing":
                    if os.path.lexists(path):
                        mounts.read_only[path] = "--ro"
                else:
                    mounts.read_only[path] = "--ro-file" if target.kind == "file" else "--ro-dir"
            continue
        path = os.path.join(root, target.relative)
        # A missing one gets an empty directory as placeholder, whatever its kind: git ignores
        # empty directories, so `git add -A` (inside or outside) never picks a placeholder up.
        mounts.read_only[path] = "--ro-dir"
        for exception in target.writable:
            writable_path = os.path.join(root, exception)
            if os.path.isdir(writable_path) and not os.path.islink(writable_path):
                mounts.writable[writable_path] = None


def _is_placeholder(path: str) -> bool:
    """An empty directory the sandbox put there itself (once filled, e.g. by a `git init`
    outside, it is a real repository)."""
    try:
        return bool(os.getxattr(path, PLACEHOLDER_MARK, follow_symlinks=False)) and (
            not os.listdir(path)
        )
    except OSError:
        return False


def _git_dirs(git: str, policy: EffectivePolicy, mounts: _Mounts) -> list[str]:
    """The git directories whose config and hooks need protecting (pinning `.git` on the way).

    `.git` may be a directory, a file pointing elsewhere (worktrees, submodules: that file is
    protected too), or missing (a placeholder then keeps a repository from being created).
    """
    if os.path.islink(git):
        raise SandboxRejected(
            f"{git} is a symbolic link: the sandbox cannot protect the repository configuration"
        )
    if not os.path.lexists(git) or policy.block_git_writes or _is_placeholder(git):
        exists = os.path.lexists(git) and not _is_placeholder(git)
        mounts.read_only[git] = "--ro" if exists else "--ro-dir"
        return []
    if os.path.isdir(git):
        mounts.pins[git] = None
        return [git]
    mounts.read_only[git] = "--ro"
    try:
        text = read_config_text(git, errors="replace")
    except OSError as exc:
        raise SandboxRejected(f"cannot read {git}: {exc.strerror}") from exc
    match = re.match(r"gitdir:\s*(.+)", text.strip())
    if match is None:
        return []
    git_dir = os.path.realpath(os.path.join(os.path.dirname(git), match.group(1).strip()))
    dirs = [git_dir]
    try:
        common = read_config_text(os.path.join(git_dir, "commondir"), errors="replace").strip()
        dirs.append(os.path.realpath(os.path.join(git_dir, common)))
    except OSError:
        pass
    return [path for path in dict.fromkeys(dirs) if os.path.isdir(path)]
