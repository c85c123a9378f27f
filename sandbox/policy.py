"""The effective sandbox policy of a call: the requested `SandboxPolicy` merged with sandbox.json.

Sources, from the call up:
- `ShellArgs.requested_sandbox_policy` (the orchestrator's request);
- `~/.cursor/sandbox.json` (the user's, every workspace) and `<workspace>/.cursor/sandbox.json`
  (the project's, higher priority): `type`, `additionalReadwritePaths`,
  `additionalReadonlyPaths`, `disableTmpWrite`, `networkPolicy {default, allow[], deny[]}`.

How they merge (nothing a file says can weaken what the call or the daemon enforces):
- Whether a call is confined: only with `--sandbox-enabled` (without it, as in the reference
  daemon, policies are not enforced: the call runs unconfined and its effective policy says so,
  `insecure_none` with a note); then `INSECURE_NONE` requested runs it unconfined and any other
  request (or none) is confined. A kernel that cannot confine it gets it rejected (service.py).
- `type`: the strictest of the request (or, when unspecified, the project's, else the user's,
  else `workspace_readwrite`) and of what either file says. A project file cannot turn the
  sandbox off (`insecure_none` there is ignored with a note); the user's file can, for calls
  that did not ask for a type.
- Paths are unioned; read-write ones apply only to `workspace_readwrite` and never reach into a
  protected path; read-only ones are carved out of read-write areas.
- Network: deny entries are unioned and always win; allow entries are unioned. The default is
  allow when the call asked for `network_access` or a file says `"default": "allow"`, else deny.
  Allow-by-default with no deny entry is the host network; with deny entries, or deny-by-default
  with allow entries, traffic goes through the daemon's proxy; otherwise there is no network.
- `disableTmpWrite` / `disable_tmp_write` and `block_git_writes`: any source setting them wins.
- `enableSharedBuildCache`: the project's value if it sets one, else the user's (default false):
  whether sandboxed commands share home's build caches with unconfined ones (sandbox/caches.py;
  either way they get writable caches).
- `maxProcesses`: how many processes and threads the sandbox may run at once (a fork bomb stops
  there), DEFAULT_MAX_PROCESSES unless the user's file says otherwise; the project's file can
  only lower it.
"""

from __future__ import annotations

import enum
import errno
import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.v1.shell_pb2 import SandboxPolicy
from exec_daemon.kernel.paths import read_config_text

# Generous for builds (make -j, a JVM's threads count too), small enough for the host to stay up.
DEFAULT_MAX_PROCESSES = 1024
MAX_PROCESSES_LIMIT = 65535

USER_CONFIG = Path("~/.cursor/sandbox.json")
PROJECT_CONFIG = Path(".cursor/sandbox.json")


class SandboxRejected(Exception):
    """A call that must not run: the policy cannot be enforced (the reason says why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SandboxSetupFailed(SandboxRejected, OSError):
    """The sandbox of a process being started could not be set up (the process is gone).

    An OSError too, so that code starting processes handles it like any failed start."""

    def __init__(self, reason: str) -> None:
        OSError.__init__(self, errno.EPERM, reason)
        self.reason = reason


class SandboxType(enum.Enum):
    INSECURE_NONE = "insecure_none"
    WORKSPACE_READWRITE = "workspace_readwrite"
    WORKSPACE_READONLY = "workspace_readonly"


class NetworkMode(enum.Enum):
    NONE = "none"  # a private network namespace with only loopback
    PROXY = "proxy"  # only through the daemon's allowlist proxy
    FULL = "full"  # the host's network


_STRICTNESS = {
    SandboxType.INSECURE_NONE: 0,
    SandboxType.WORKSPACE_READWRITE: 1,
    SandboxType.WORKSPACE_READONLY: 2,
}
_PROTO_TYPES = {
    SandboxPolicy.TYPE_INSECURE_NONE: SandboxType.INSECURE_NONE,
    SandboxPolicy.TYPE_WORKSPACE_READWRITE: SandboxType.WORKSPACE_READWRITE,
    SandboxPolicy.TYPE_WORKSPACE_READONLY: SandboxType.WORKSPACE_READONLY,
}
_TYPE_TO_PROTO = {kind: number for number, kind in _PROTO_TYPES.items()}
_NETWORK_TO_PROTO = {
    NetworkMode.NONE: SandboxPolicy.NETWORK_MODE_NONE,
    NetworkMode.PROXY: SandboxPolicy.NETWORK_MODE_PROXY,
    NetworkMode.FULL: SandboxPolicy.NETWORK_MODE_FULL,
}

_HOST_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")


_WITH_PORT = re.compile(r"^(\[[^\]]+\]|[^:\[\]]+):(\d{1,5})$")


@dataclass(frozen=True)
class HostPattern:
    """One `networkPolicy` entry: an exact host, `*.domain` (its subdomains) or a CIDR/IP, each
    optionally with `:port` (`[v6 address]:port`), which then matches that port only."""

    text: str
    host: str | None = None
    suffix: str | None = None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        entry = text.strip().lower().rstrip(".")
        with_port = _WITH_PORT.match(entry)
        if with_port is not None:
            port = int(with_port.group(2))
            if not 1 <= port <= 65535:
                raise ValueError(f"{text!r}: the port must be 1..65535")
            if with_port.group(1).startswith("[") and ":" not in with_port.group(1):
                raise ValueError(f"{text!r}: only an IPv6 address goes in brackets")
            host = cls._parse_host(with_port.group(1).strip("[]"), text)
            if host.network is not None and host.network.num_addresses > 1:
                raise ValueError(f"{text!r}: a port goes with one address, not a network")
            return replace(host, text=entry, port=port)
        return cls._parse_host(entry, text)

    @classmethod
    def _parse_host(cls, entry: str, text: str) -> HostPattern:
        try:
            return cls(text=entry, network=ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            pass
        if entry.startswith("*."):
            domain = entry[2:]
            if _is_host_name(domain):
                return cls(text=entry, suffix="." + domain)
        elif _is_host_name(entry):
            return cls(text=entry, host=entry)
        raise ValueError(f"{text!r} is not a host, *.domain or CIDR (each with an optional :port)")

    def _port_matches(self, port: int | None) -> bool:
        return self.port is None or self.port == port

    def matches_name(self, host: str, port: int | None = None) -> bool:
        if not self._port_matches(port):
            return False
        if self.host is not None:
            return host == self.host
        return self.suffix is not None and host.endswith(self.suffix)

    def matches_address(
        self, address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int | None = None
    ) -> bool:
        return (
            self._port_matches(port)
            and self.network is not None
            and address.version == self.network.version
            and (address in self.network)
        )

    def opens_loopback(
        self, name: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int
    ) -> bool:
        """An explicit loopback entry with a port (`127.0.0.1:3000`, `[::1]:3000`,
        `localhost:3000`) for this connection: the one way a sandboxed command reaches a
        server on the host's loopback (no wildcard, network or port-less entry does)."""
        if self.port != port or not address.is_loopback:
            return False
        if self.host == "localhost":
            return name == "localhost"
        return self.network is not None and self.matches_address(address, port)


def _is_host_name(text: str) -> bool:
    labels = text.split(".")
    return 0 < len(text) <= 253 and all(_HOST_LABEL.match(label) for label in labels)


@dataclass(frozen=True)
class NetworkPolicy:
    default_allow: bool = False
    allow: tuple[HostPattern, ...] = ()
    deny: tuple[HostPattern, ...] = ()

    @property
    def mode(self) -> NetworkMode:
        if self.default_allow:
            return NetworkMode.PROXY if self.deny else NetworkMode.FULL
        return NetworkMode.PROXY if self.allow else NetworkMode.NONE


@dataclass(frozen=True)
class EffectivePolicy:
    """What a call's command may do. `sandboxed` False means it runs unconfined."""

    sandboxed: bool
    type: SandboxType
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    readwrite_paths: tuple[str, ...] = ()
    readonly_paths: tuple[str, ...] = ()
    block_git_writes: bool = False
    disable_tmp_write: bool = False
    max_processes: int = DEFAULT_MAX_PROCESSES
    shared_build_cache: bool = False
    # None: the whole file system may be read (but the hidden secret files). Else only these
    # folders and files, and the files open on the descriptors the command is passed.
    readable: tuple[str, ...] | None = None
    # Entries that were ignored and why (returned to the caller with the effective policy).
    notes: tuple[str, ...] = ()

    def to_proto(self) -> SandboxPolicy:
        mode = self.network.mode if self.sandboxed else NetworkMode.FULL
        return SandboxPolicy(
            type=_TYPE_TO_PROTO[self.type],  # type: ignore[arg-type]
            network_access=mode != NetworkMode.NONE,
            additional_readwrite_paths=list(self.readwrite_paths),
            additional_readonly_paths=list(self.readonly_paths),
            block_git_writes=self.block_git_writes,
            disable_tmp_write=self.disable_tmp_write,
            network_allow=[pattern.text for pattern in self.network.allow],
            network_deny=[pattern.text for pattern in self.network.deny],
            network_mode=_NETWORK_TO_PROTO[mode],  # type: ignore[arg-type]
            notes=list(self.notes),
        )


UNCONFINED = EffectivePolicy(sandboxed=False, type=SandboxType.INSECURE_NONE)
NOT_ENABLED_NOTE = (
    "sandboxing is not enabled on this daemon (--sandbox-enabled): the command ran unconfined"
)


@dataclass(frozen=True)
class SandboxConfig:
    """One parsed sandbox.json (fields absent from the file are None / empty)."""

    source: str
    type: SandboxType | None = None
    readwrite_paths: tuple[str, ...] = ()
    readonly_paths: tuple[str, ...] = ()
    disable_tmp_write: bool = False
    network_default: str | None = None
    network_allow: tuple[str, ...] = ()
    network_deny: tuple[str, ...] = ()
    max_processes: int | None = None
    shared_build_cache: bool | None = None
    notes: tuple[str, ...] = ()


def parse_config(text: str, source: str) -> SandboxConfig:
    """Parses sandbox.json (JSON, comments and trailing commas tolerated).

    Raises SandboxRejected when the file is not valid: a deny rule that cannot be read must not
    be skipped silently.
    """
    import json5  # ~10 ms to import; few workspaces have the file

    try:
        data = json5.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise SandboxRejected(f"{source} is not valid JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise SandboxRejected(f"{source} must hold a JSON object")
    notes: list[str] = []
    kind = None
    if "type" in data:
        try:
            kind = SandboxType(str(data["type"]).lower())
        except ValueError:
            raise SandboxRejected(f"{source}: unknown type {data['type']!r}") from None
    network = data.get("networkPolicy") or {}
    if not isinstance(network, Mapping):
        raise SandboxRejected(f"{source}: networkPolicy must be an object")
    default = network.get("default")
    if default is not None and default not in ("allow", "deny"):
        raise SandboxRejected(f"{source}: networkPolicy.default must be 'allow' or 'deny'")
    shared_build_cache = data.get("enableSharedBuildCache")
    if shared_build_cache is not None and not isinstance(shared_build_cache, bool):
        raise SandboxRejected(f"{source}: enableSharedBuildCache must be true or false")
    return SandboxConfig(
        source=source,
        type=kind,
        readwrite_paths=_strings(data, "additionalReadwritePaths", source),
        readonly_paths=_strings(data, "additionalReadonlyPaths", source),
        disable_tmp_write=bool(data.get("disableTmpWrite", False)),
        network_default=default,
        network_allow=_strings(network, "allow", source + ": networkPolicy"),
        network_deny=_strings(network, "deny", source + ": networkPolicy"),
        max_processes=_max_processes(data, source),
        shared_build_cache=shared_build_cache,
        notes=tuple(notes),
    )


def _max_processes(data: Mapping[str, Any], source: str) -> int | None:
    value = data.get("maxProcesses")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SandboxRejected(f"{source}: maxProcesses must be a whole number")
    if not 2 <= value <= MAX_PROCESSES_LIMIT:
        raise SandboxRejected(f"{source}: maxProcesses must be between 2 and {MAX_PROCESSES_LIMIT}")
    return value


def _strings(data: Mapping[str, Any], key: str, source: str) -> tuple[str, ...]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SandboxRejected(f"{source}: {key} must be a list of strings")
    return tuple(value)


class ConfigFiles:
    """Reads the two sandbox.json files, re-parsing one only when it changed on disk."""

    def __init__(self, workspace: Path, home: Path | None = None) -> None:
        self.user_path = (home or Path.home()) / ".cursor" / "sandbox.json"
        self.project_path = workspace / PROJECT_CONFIG
        self._cache: dict[Path, tuple[tuple[int, int, int], SandboxConfig]] = {}

    def load(self) -> tuple[SandboxConfig | None, SandboxConfig | None]:
        return self._load(self.user_path, "~/.cursor/sandbox.json"), self._load(
            self.project_path, ".cursor/sandbox.json"
        )

    def _load(self, path: Path, source: str) -> SandboxConfig | None:
        try:
            info = path.stat()
        except FileNotFoundError:
            self._cache.pop(path, None)
            return None
        except OSError as exc:
            raise SandboxRejected(f"cannot read {source}: {exc.strerror}") from exc
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            text = read_config_text(path, errors="replace")
        except OSError as exc:
            raise SandboxRejected(f"cannot read {source}: {exc.strerror}") from exc
        config = parse_config(text, source)
        self._cache[path] = (stamp, config)
        return config


def resolve_policy(
    requested: SandboxPolicy | None,
    *,
    sandbox_enabled: bool,
    workspace: Path,
    user: SandboxConfig | None = None,
    project: SandboxConfig | None = None,
) -> EffectivePolicy:
    """The effective policy of a call (see the module docstring). Raises SandboxRejected."""
    requested_type = _PROTO_TYPES.get(requested.type) if requested is not None else None
    if requested_type == SandboxType.INSECURE_NONE:
        return UNCONFINED
    if not sandbox_enabled:
        if requested_type is None:
            return UNCONFINED
        return replace(UNCONFINED, notes=(NOT_ENABLED_NOTE,))
    configs = [config for config in (user, project) if config is not None]
    notes = [note for config in configs for note in config.notes]

    project_type = project.type if project is not None else None
    if project_type == SandboxType.INSECURE_NONE:
        notes.append(".cursor/sandbox.json: a project cannot turn the sandbox off (type ignored)")
        project_type = None
    user_type = user.type if user is not None else None
    base = requested_type or project_type or user_type or SandboxType.WORKSPACE_READWRITE
    if base == SandboxType.INSECURE_NONE:
        return replace(UNCONFINED, notes=tuple(notes))
    stricter = [t for t in (project_type, user_type) if t not in (None, SandboxType.INSECURE_NONE)]
    kind = max([base, *stricter], key=_STRICTNESS.__getitem__)  # type: ignore[arg-type]

    request = requested or SandboxPolicy()
    network = _network_policy(request, configs, notes)
    readwrite = _paths(
        [*request.additional_readwrite_paths, *(p for c in configs for p in c.readwrite_paths)],
        workspace,
    )
    readonly = _paths(
        [*request.additional_readonly_paths, *(p for c in configs for p in c.readonly_paths)],
        workspace,
    )
    if kind != SandboxType.WORKSPACE_READWRITE and readwrite:
        notes.append("additional read-write paths apply only to workspace_readwrite (ignored)")
        readwrite = ()
    return EffectivePolicy(
        sandboxed=True,
        type=kind,
        network=network,
        readwrite_paths=readwrite,
        readonly_paths=readonly,
        block_git_writes=request.block_git_writes,
        disable_tmp_write=request.disable_tmp_write or any(c.disable_tmp_write for c in configs),
        max_processes=_effective_max_processes(user, project),
        shared_build_cache=_shared_build_cache(user, project),
        notes=tuple(notes),
    )


def _shared_build_cache(user: SandboxConfig | None, project: SandboxConfig | None) -> bool:
    for config in (project, user):
        if config is not None and config.shared_build_cache is not None:
            return config.shared_build_cache
    return False


def _effective_max_processes(user: SandboxConfig | None, project: SandboxConfig | None) -> int:
    limit = DEFAULT_MAX_PROCESSES
    if user is not None and user.max_processes is not None:
        limit = user.max_processes
    if project is not None and project.max_processes is not None:
        limit = min(limit, project.max_processes)
    return limit


def _network_policy(
    request: SandboxPolicy, configs: list[SandboxConfig], notes: list[str]
) -> NetworkPolicy:
    defaults = [c.network_default for c in reversed(configs) if c.network_default is not None]
    default_allow = request.network_access or (bool(defaults) and defaults[0] == "allow")
    deny: list[HostPattern] = []
    for text in [*request.network_deny, *(e for c in configs for e in c.network_deny)]:
        try:
            deny.append(HostPattern.parse(text))
        except ValueError as exc:
            # An unreadable deny entry cannot be enforced: refuse rather than skip it.
            raise SandboxRejected(f"networkPolicy.deny: {exc}") from None
    allow: list[HostPattern] = []
    for text in [*request.network_allow, *(e for c in configs for e in c.network_allow)]:
        try:
            allow.append(HostPattern.parse(text))
        except ValueError as exc:
            notes.append(f"networkPolicy.allow: {exc} (ignored)")
    return NetworkPolicy(default_allow=default_allow, allow=_unique(allow), deny=_unique(deny))


def _unique(patterns: Iterable[HostPattern]) -> tuple[HostPattern, ...]:
    return tuple({pattern.text: pattern for pattern in patterns}.values())


def _paths(paths: Iterable[str], workspace: Path) -> tuple[str, ...]:
    """Absolute, normalised, deduplicated: `~` expands, relative paths are workspace-relative."""
    result: dict[str, None] = {}
    for path in paths:
        if not path.strip():
            continue
        expanded = os.path.expanduser(path.strip())
        result[os.path.normpath(os.path.join(str(workspace), expanded))] = None
    return tuple(result)
