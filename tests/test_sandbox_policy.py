"""sandbox/policy.py and sandbox/protected.py: how the request and sandbox.json files merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.v1.shell_pb2 import SandboxPolicy
from sandbox.policy import (
    DEFAULT_MAX_PROCESSES,
    ConfigFiles,
    HostPattern,
    NetworkMode,
    SandboxConfig,
    SandboxRejected,
    SandboxType,
    parse_config,
    resolve_policy,
)
from sandbox.protected import ProtectedTarget, protected_targets
from tools.workspace import protected_reason

RW = SandboxPolicy.TYPE_WORKSPACE_READWRITE
RO = SandboxPolicy.TYPE_WORKSPACE_READONLY
NONE = SandboxPolicy.TYPE_INSECURE_NONE
WORKSPACE = Path("/work/project")


def config(source: str = "project", **data: object) -> SandboxConfig:
    return parse_config(json.dumps(data), source)


def resolve(requested: SandboxPolicy | None = None, *, enabled: bool = True, **kwargs: object):
    return resolve_policy(requested, sandbox_enabled=enabled, workspace=WORKSPACE, **kwargs)  # type: ignore[arg-type]


def test_insecure_none_requested_runs_unconfined_even_when_files_ask_for_more() -> None:
    policy = resolve(SandboxPolicy(type=NONE), project=config(type="workspace_readonly"))
    assert not policy.sandboxed
    assert policy.to_proto().type == NONE


def test_without_sandbox_enabled_an_unspecified_policy_is_unconfined() -> None:
    assert not resolve(None, enabled=False).sandboxed
    assert not resolve(SandboxPolicy(), enabled=False).sandboxed


def test_without_sandbox_enabled_a_requested_sandbox_is_reported_as_not_applied() -> None:
    policy = resolve(SandboxPolicy(type=RW), enabled=False)
    assert not policy.sandboxed
    proto = policy.to_proto()
    assert proto.type == NONE and proto.network_mode == SandboxPolicy.NETWORK_MODE_FULL
    assert "--sandbox-enabled" in proto.notes[0]


def test_default_is_workspace_readwrite_without_network() -> None:
    policy = resolve(None)
    assert policy.sandboxed
    assert policy.type == SandboxType.WORKSPACE_READWRITE
    assert policy.network.mode == NetworkMode.NONE
    proto = policy.to_proto()
    assert proto.type == RW and not proto.network_access
    assert proto.network_mode == SandboxPolicy.NETWORK_MODE_NONE


def test_strictest_type_wins_and_a_project_cannot_turn_the_sandbox_off() -> None:
    assert resolve(SandboxPolicy(type=RW), user=config("user", type="workspace_readonly")).type == (
        SandboxType.WORKSPACE_READONLY
    )
    assert resolve(SandboxPolicy(type=RO), project=config(type="workspace_readwrite")).type == (
        SandboxType.WORKSPACE_READONLY
    )
    policy = resolve(None, project=config(type="insecure_none"))
    assert policy.sandboxed and policy.type == SandboxType.WORKSPACE_READWRITE
    assert any("cannot turn the sandbox off" in note for note in policy.notes)
    # The user's own file may turn it off for calls that did not ask for a type...
    assert not resolve(None, user=config("user", type="insecure_none")).sandboxed
    # ...but not for calls that did.
    assert resolve(SandboxPolicy(type=RW), user=config("user", type="insecure_none")).sandboxed


def test_paths_are_unioned_normalised_and_readwrite_only_for_readwrite() -> None:
    policy = resolve(
        SandboxPolicy(type=RW, additional_readwrite_paths=["build"]),
        user=config("user", additionalReadwritePaths=["/opt/cache", "/opt/cache/"]),
        project=config(additionalReadonlyPaths=["vendor"], additionalReadwritePaths=["~/x"]),
    )
    assert policy.readwrite_paths == (
        "/work/project/build",
        "/opt/cache",
        str(Path("~/x").expanduser()),
    )
    assert policy.readonly_paths == ("/work/project/vendor",)
    readonly = resolve(
        SandboxPolicy(type=RO, additional_readwrite_paths=["/opt/cache"]),
    )
    assert readonly.readwrite_paths == ()
    assert any("apply only to workspace_readwrite" in note for note in readonly.notes)


def test_network_modes() -> None:
    assert resolve(SandboxPolicy(type=RW, network_access=True)).network.mode == NetworkMode.FULL
    allow = resolve(None, project=config(networkPolicy={"allow": ["example.com"]}))
    assert allow.network.mode == NetworkMode.PROXY and not allow.network.default_allow
    deny_some = resolve(
        None, user=config("user", networkPolicy={"default": "allow", "deny": ["x.io"]})
    )
    assert deny_some.network.mode == NetworkMode.PROXY and deny_some.network.default_allow
    # The project's default has priority over the user's.
    project_first = resolve(
        None,
        user=config("user", networkPolicy={"default": "allow"}),
        project=config(networkPolicy={"default": "deny"}),
    )
    assert project_first.network.mode == NetworkMode.NONE


def test_network_entries_are_unioned_deny_from_every_source() -> None:
    policy = resolve(
        SandboxPolicy(type=RW, network_allow=["a.com"], network_deny=["10.0.0.0/8"]),
        user=config("user", networkPolicy={"allow": ["*.b.com"], "deny": ["evil.com"]}),
        project=config(networkPolicy={"allow": ["a.com", "not a host!"], "deny": ["*.evil.org"]}),
    )
    assert [p.text for p in policy.network.allow] == ["a.com", "*.b.com"]
    assert [p.text for p in policy.network.deny] == ["10.0.0.0/8", "evil.com", "*.evil.org"]
    assert any("not a host!" in note for note in policy.notes)
    proto = policy.to_proto()
    assert list(proto.network_deny) == ["10.0.0.0/8", "evil.com", "*.evil.org"]


def test_an_unreadable_deny_entry_rejects_instead_of_being_skipped() -> None:
    with pytest.raises(SandboxRejected, match="deny"):
        resolve(None, project=config(networkPolicy={"deny": ["***"]}))


def test_tmp_write_and_git_flags_any_source_wins() -> None:
    policy = resolve(
        SandboxPolicy(type=RW, block_git_writes=True), user=config("user", disableTmpWrite=True)
    )
    assert policy.disable_tmp_write and policy.block_git_writes


def test_invalid_files_reject_with_the_reason() -> None:
    with pytest.raises(SandboxRejected, match="not valid JSON"):
        parse_config("{nope", ".cursor/sandbox.json")
    with pytest.raises(SandboxRejected, match="unknown type"):
        parse_config('{"type": "wide_open"}', ".cursor/sandbox.json")
    with pytest.raises(SandboxRejected, match="list of strings"):
        parse_config('{"additionalReadwritePaths": "/x"}', ".cursor/sandbox.json")
    # Comments and trailing commas are fine (JSON5).
    assert parse_config('{// note\n "disableTmpWrite": true,}', "x").disable_tmp_write


def test_config_files_are_read_from_home_and_workspace(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    (home / ".cursor").mkdir(parents=True)
    (workspace / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "sandbox.json").write_text('{"networkPolicy": {"deny": ["evil.com"]}}')
    files = ConfigFiles(workspace, home=home)
    user, project = files.load()
    assert user is not None and user.network_deny == ("evil.com",)
    assert project is None
    (workspace / ".cursor" / "sandbox.json").write_text('{"type": "workspace_readonly"}')
    user, project = files.load()
    assert project is not None and project.type == SandboxType.WORKSPACE_READONLY


def test_host_patterns() -> None:
    exact, wildcard, cidr = (
        HostPattern.parse(t) for t in ("Example.COM.", "*.example.com", "10.0.0.0/8")
    )
    assert exact.matches_name("example.com") and not exact.matches_name("a.example.com")
    assert wildcard.matches_name("a.example.com") and wildcard.matches_name("a.b.example.com")
    assert not wildcard.matches_name("example.com") and not wildcard.matches_name("badexample.com")
    import ipaddress

    assert cidr.matches_address(ipaddress.ip_address("10.1.2.3"))
    assert not cidr.matches_address(ipaddress.ip_address("11.0.0.1"))
    assert HostPattern.parse("[::1]").network is not None
    for bad in ("", "*", "http://x.com", "a..b", "x.com/path"):
        with pytest.raises(ValueError):
            HostPattern.parse(bad)


def test_protected_targets_follow_the_file_tools_rules() -> None:
    targets = {target.relative: target for target in protected_targets()}
    assert targets[".git/config"] == ProtectedTarget(".git/config", "file")
    assert targets[".git/hooks"].kind == "dir"
    assert targets[".vscode"].kind == "dir"
    assert targets[".cursorignore"].kind == "file"
    assert targets[".claude"].kind == "dir"
    assert set(targets[".cursor"].writable) == {
        ".cursor/rules",
        ".cursor/commands",
        ".cursor/worktrees",
        ".cursor/skills",
        ".cursor/agents",
        ".cursor/plans",
    }
    assert set(targets[".claude"].writable) == {
        ".claude/commands",
        ".claude/agents",
        ".claude/skills",
    }
    # Whatever the file tools refuse, the sandbox mounts read-only (a directory covers its tree),
    # and the writable exceptions are exactly what the file tools allow.
    samples = [
        ".git/config",
        ".git/hooks/pre-commit",
        ".vscode/settings.json",
        ".cursorignore",
        ".cursor/mcp.json",
        ".cursor/deep/x.json",
        ".claude/settings.json",
        ".cursor/rules/a.json",
        ".cursor/worktrees/w/a.json",
        "src/a.json",
    ]
    for sample in samples:
        refused = protected_reason("/w", "/w/" + sample) is not None
        covered = any(
            (sample == t.relative or sample.startswith(t.relative + "/"))
            and not any(sample.startswith(w + "/") for w in t.writable)
            for t in targets.values()
        )
        assert not refused or covered, sample
        assert refused == covered or sample.startswith((".cursor/", ".claude/")), sample


def test_max_processes_the_user_sets_it_the_project_can_only_lower_it() -> None:
    assert resolve().max_processes == DEFAULT_MAX_PROCESSES
    assert resolve(user=config("user", maxProcesses=4000)).max_processes == 4000
    raised = resolve(project=config(maxProcesses=4000))
    assert raised.max_processes == DEFAULT_MAX_PROCESSES
    lowered = resolve(user=config("user", maxProcesses=4000), project=config(maxProcesses=64))
    assert lowered.max_processes == 64
    for bad in ("many", 1, 10**6, True):
        with pytest.raises(SandboxRejected, match="maxProcesses"):
            config(maxProcesses=bad)


def test_host_patterns_with_a_port() -> None:
    import ipaddress

    loopback, v6, named, remote = (
        HostPattern.parse(t)
        for t in ("127.0.0.1:3000", "[::1]:3000", "LocalHost:3000", "example.com:443")
    )
    assert (loopback.port, loopback.text) == (3000, "127.0.0.1:3000")
    one27 = ipaddress.ip_address("127.0.0.1")
    assert loopback.matches_address(one27, 3000) and not loopback.matches_address(one27, 3001)
    assert loopback.opens_loopback("127.0.0.1", one27, 3000)
    assert not loopback.opens_loopback("127.0.0.1", one27, 8080)
    assert v6.opens_loopback("::1", ipaddress.ip_address("::1"), 3000)
    assert named.opens_loopback("localhost", one27, 3000)
    assert remote.matches_name("example.com", 443) and not remote.matches_name("example.com", 80)
    # Only an explicit loopback address or `localhost`, with a port, opens the host's loopback.
    for text in ("127.0.0.0/8", "127.0.0.1", "localhost", "*.localhost:3000", "example.com:3000"):
        assert not HostPattern.parse(text).opens_loopback("localhost", one27, 3000), text
    for bad in ("127.0.0.0/8:80", "[127.0.0.1]:80", "x.com:0", "x.com:70000", "x.com:"):
        with pytest.raises(ValueError):
            HostPattern.parse(bad)
