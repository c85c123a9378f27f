"""Build caches for sandboxed package managers (npm, pip, uv, cargo, go, gradle).

Home is read-only inside the sandbox, where these tools keep their caches, so without this
`npm install`, `pip install`, `cargo build` or `go build` could not cache what they fetch
(npm fails outright). `workspace_readwrite` sandboxes therefore get writable caches:

- By default, a cache folder of the sandboxes' own, `--sandbox-build-cache-folder` (one per
  daemon, shared by every sandboxed command, made by the daemon at start: a real directory of
  its user, mode 0700): each tool's variable points into it (CACHE_VARIABLES). Unconfined
  commands never use it, so what a sandboxed command leaves there (a cargo `config.toml` in
  `CARGO_HOME`, a gradle init script) only ever reaches other sandboxed commands.
- With `"enableSharedBuildCache": true` in sandbox.json (the reference's field), sandboxed
  commands share the tools' own caches with unconfined ones: the default cache folders of home
  (HOME_CACHES) become writable, each only after its real path is checked: reached from home
  without a symbolic link, not home itself, and neither inside nor around anything protected
  (rc files, `.ssh`, `.gitconfig`, `.cursor/`, the workspace); a refused one gets a note. The
  environment's variables (npm_config_cache, XDG_CACHE_HOME, ...) are not followed: the agent
  can set them, and would then choose which folder of home (say `~/.local/bin`) turns writable.
  Only cache folders are opened, never `~/.cargo` or `~/.gradle` themselves, where cargo's
  `config.toml` and gradle's init scripts live.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from exec_daemon.kernel.paths import ensure_daemon_folder
from exec_daemon.kernel.protected import protected_reason

# Default mode: each variable -> its folder under the sandboxes' cache folder.
CACHE_VARIABLES: dict[str, str] = {
    "npm_config_cache": "npm",
    "PIP_CACHE_DIR": "pip",
    "UV_CACHE_DIR": "uv",
    "CARGO_HOME": "cargo",
    "GOMODCACHE": "go/mod",
    "GOCACHE": "go/build",
    "GRADLE_USER_HOME": "gradle",
}

# Shared mode: the tools' default cache folders, relative to home. Only cache folders: never
# `.cargo` or `.gradle` themselves (cargo's config.toml and bin/, gradle's init.d/ and
# gradle.properties run code or configure it).
HOME_CACHES = (
    ".npm",
    ".cache/pip",
    ".cache/uv",
    ".cargo/registry",
    ".cargo/git",
    "go/pkg/mod",
    ".cache/go-build",
    ".gradle/caches",
    ".gradle/wrapper",
)


@dataclass
class CacheGrant:
    """What a sandboxed command gets for its caches: variables to set, folders it may write."""

    env: dict[str, str] = field(default_factory=dict)
    writable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class SandboxCacheFolder:
    """The sandboxes' own cache folder, made at the daemon's start and checked at every use."""

    def __init__(self, path: Path | str) -> None:
        self.path = os.path.abspath(path)
        self.real = self.path
        self._identity: tuple[int, int] | None = None
        self.error: str | None = None

    def prepare(self) -> None:
        """Creates it (a real folder of the daemon's user, 0700); remembers which it is."""
        try:
            ensure_daemon_folder(self.path, mode=0o700)
            self.real = os.path.realpath(self.path)
            info = os.lstat(self.real)
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror or exc}"
            return
        self._identity = (info.st_dev, info.st_ino)

    def made(self) -> bool:
        """Whether `prepare` made it (checked at start; `intact` checks it is still there)."""
        return self._identity is not None

    def intact(self) -> bool:
        """Still the folder made at start, where it was: not replaced (e.g. by a symlink)."""
        if self._identity is None or os.path.realpath(self.path) != self.real:
            return False
        try:
            info = os.lstat(self.real)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self._identity

    def grant(self) -> CacheGrant:
        if self._identity is None and self.error is None:
            self.prepare()  # a caller that did not start the service first
        if not self.intact():
            why = self.error or f"{self.path} was replaced since the daemon made it"
            return CacheGrant(notes=[f"build caches are off: {why}"])
        return CacheGrant(
            env={name: os.path.join(self.real, sub) for name, sub in CACHE_VARIABLES.items()},
            writable=[self.real],
        )


def shared_grant(
    home: str, workspace: str, protected: Sequence[str], *, create: bool = True
) -> CacheGrant:
    """Shared mode: the cache folders of `home` (a real path) that pass the checks, created
    when missing (without `create`, missing ones are left out)."""
    grant = CacheGrant()
    for relative in HOME_CACHES:
        path = os.path.join(home, relative)
        if not create and not os.path.isdir(path):
            continue
        refusal = _refusal(path, workspace, protected)
        if refusal is None:
            try:
                os.makedirs(path, mode=0o755, exist_ok=True)
            except OSError as exc:
                refusal = f"cannot be created: {exc.strerror}"
            else:
                # Made where it was checked to be, not where a symlink put it since.
                refusal = _refusal(path, workspace, protected)
        if refusal is not None:
            grant.notes.append(f"build cache {path} is not writable here: {refusal}")
        else:
            grant.writable.append(path)
    return grant


def _refusal(path: str, workspace: str, protected: Sequence[str]) -> str | None:
    """Why `path` (under a real home) must not be made writable, or None."""
    real = os.path.realpath(path)
    if real != path:
        return f"it resolves to {real} through a symbolic link"
    if _under(workspace, real):
        return f"it resolves to {real}, which holds the workspace"
    for target in protected:
        if _under(real, target) or _under(target, real):
            return f"it resolves to {real}, which holds or lies in protected {target}"
    reason = protected_reason(workspace, real)
    if reason is not None:
        return f"it resolves to {real}: {reason}"
    return None


def _under(path: str, root: str) -> bool:
    """`path` is `root` or inside it (both absolute and normalised)."""
    return os.path.commonpath([path, root]) == root
