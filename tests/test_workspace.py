"""tools/workspace.py: protected paths, `.cursorignore` (through the real tools), path resolution."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel.protected import PROTECTED_PATH_RULES
from tests.daemon_process import RunningDaemon, running_daemon
from tests.workspace_support import (
    case,
    glob_call,
    grep_call,
    ls_call,
    read_call,
    result_of,
    write_call,
)
from tools.workspace import display_path, protected_reason, resolve_path

WORKSPACE = Path("/work/space")


@pytest.mark.parametrize(
    "relative",
    [
        ".git/config",
        ".git/hooks",
        ".git/hooks/pre-commit",
        "vendor/lib/.git/config",
        ".vscode",
        ".vscode/settings.json",
        ".vscode/tasks.json",
        ".cursorignore",
        ".cursor/mcp.json",
        ".cursor/hooks.json",
        ".cursor/environment.json",
        ".cursor/deep/nested/x.json",
        # Hook scripts live anywhere under .cursor (issue 10 item 7): all of it is protected.
        ".cursor/hooks/audit.sh",
        ".cursor/notes.md",
        ".claude/hooks/check.py",
    ],
)
def test_protected_paths_are_refused_with_a_reason(relative: str) -> None:
    reason = protected_reason(WORKSPACE, WORKSPACE / relative)
    assert reason is not None and "protected path" in reason
    assert relative in reason


@pytest.mark.parametrize(
    "relative",
    [
        ".git/HEAD",
        ".gitignore",
        "src/.vscode/x.json",
        ".cursor/rules/style.json",
        ".cursor/commands/deploy.json",
        ".cursor/skills/a/b.json",
        ".cursor/agents/x.json",
        ".cursor/rules/python.mdc",
        ".claude/commands/review.md",
        "README.md",
    ],
)
def test_other_paths_are_not_protected(relative: str) -> None:
    assert protected_reason(WORKSPACE, WORKSPACE / relative) is None


def test_a_symlink_into_a_protected_path_is_protected(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / "innocent").symlink_to(tmp_path / ".git" / "config")
    reason = protected_reason(tmp_path, tmp_path / "innocent")
    assert reason is not None and ".git/config" in reason


def test_git_rules_apply_outside_the_workspace_too() -> None:
    assert protected_reason(WORKSPACE, Path("/other/repo/.git/hooks/post-merge")) is not None
    assert protected_reason(WORKSPACE, Path("/other/.vscode/settings.json")) is None


def test_every_refusing_rule_says_why() -> None:
    assert all(rule.reason or rule.pattern.startswith("!") for rule in PROTECTED_PATH_RULES)


def test_resolve_and_display_paths() -> None:
    assert resolve_path(WORKSPACE, "a/../b.txt") == WORKSPACE / "b.txt"
    assert resolve_path(WORKSPACE, "/etc/hosts") == Path("/etc/hosts")
    assert resolve_path(WORKSPACE, "") == WORKSPACE
    assert resolve_path(WORKSPACE, "~/x") == Path(os.path.expanduser("~/x"))
    assert display_path(WORKSPACE, WORKSPACE / "src" / "a.py") == "src/a.py"
    assert display_path(WORKSPACE, Path("/etc/hosts")) == "/etc/hosts"
    assert display_path(Path("/work/sp"), Path("/work/space/x")) == "/work/space/x"


# ---------------------------------------------------------------------------------------------
# .cursorignore, through the agent's tools


@pytest.fixture(scope="module")
def ignoring_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("cursorignore")
    workspace = root / "workspace"
    files = {
        ".cursorignore": "secrets/\n*.key\n/private.txt\n!public.key\n",
        "app.py": "token = load()\n",
        "secrets/db.txt": "token = hunter2\n",
        "nested/secrets/x.txt": "token = deep\n",
        "id.key": "token = key\n",
        "public.key": "token = public\n",
        "private.txt": "token = private\n",
        "sub/private.txt": "token = not hidden, the pattern is anchored\n",
    }
    for relative, content in files.items():
        path = workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    with running_daemon(workspace, root / "state") as running:
        yield running


@pytest.fixture
async def client(ignoring_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with ignoring_daemon.client() as connected:
        yield connected


VISIBLE = ["app.py", "public.key", "sub/private.txt"]


async def test_cursorignore_hides_files_from_read(client: ExecDaemonClient) -> None:
    for hidden in ["secrets/db.txt", "nested/secrets/x.txt", "id.key", "private.txt"]:
        result = await result_of(client, read_call(hidden))
        assert case(result) == "permission_denied", hidden
        assert ".cursorignore" in result.permission_denied.reason
    for visible in VISIBLE:
        assert case(await result_of(client, read_call(visible))) == "success", visible


async def test_cursorignore_hides_files_from_grep(client: ExecDaemonClient) -> None:
    result = await result_of(client, grep_call("token", output_mode="files_with_matches"))
    assert sorted(result.success.files) == VISIBLE
    inside = await result_of(client, grep_call("token", path="secrets"))
    assert case(inside) == "permission_denied"
    sub = await result_of(client, grep_call("token", path="sub", output_mode="files_with_matches"))
    assert list(sub.success.files) == ["sub/private.txt"]


async def test_cursorignore_hides_files_from_glob(client: ExecDaemonClient) -> None:
    result = await result_of(client, glob_call("*"))
    assert sorted(result.success.files) == [".cursorignore", *VISIBLE]
    nested = await result_of(client, glob_call("*.txt", "nested"))
    assert list(nested.success.files) == []
    # A glob naming the hidden files does not bring them back (ripgrep's --glob would).
    keys = await result_of(client, glob_call("*.key"))
    assert list(keys.success.files) == ["public.key"]
    python = await result_of(client, glob_call("*.py"))
    assert list(python.success.files) == ["app.py"]


async def test_a_grep_glob_does_not_reveal_hidden_files(client: ExecDaemonClient) -> None:
    keys = await result_of(
        client, grep_call("token", glob="*.key", output_mode="files_with_matches")
    )
    assert list(keys.success.files) == ["public.key"]
    secrets = await result_of(client, grep_call("token", glob="secrets/*"))
    assert not secrets.success.matches
    python = await result_of(client, grep_call("token", glob="*.py"))
    assert [m.file for m in python.success.matches] == ["app.py"]


async def test_cursorignore_hides_files_from_ls(client: ExecDaemonClient) -> None:
    result = await result_of(client, ls_call(""))
    root = result.success.root
    assert sorted(f.name for f in root.children_files) == [".cursorignore", "app.py", "public.key"]
    assert sorted(Path(d.abs_path).name for d in root.children_dirs) == ["nested", "sub"]
    assert case(await result_of(client, ls_call("secrets"))) == "permission_denied"


async def test_cursorignore_itself_cannot_be_rewritten_by_the_agent(
    client: ExecDaemonClient, ignoring_daemon: RunningDaemon
) -> None:
    result = await result_of(client, write_call(".cursorignore", ""))
    assert case(result) == "permission_denied"
    assert "secrets/" in (ignoring_daemon.workspace / ".cursorignore").read_text()


async def test_cursorignore_changes_apply_at_once(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("x\n")
    with running_daemon(workspace, tmp_path / "state") as daemon:
        async with daemon.client() as client:
            assert case(await result_of(client, read_call("a.txt"))) == "success"
            (workspace / ".cursorignore").write_text("a.txt\n")
            assert case(await result_of(client, read_call("a.txt"))) == "permission_denied"
            (workspace / ".cursorignore").unlink()
            assert case(await result_of(client, read_call("a.txt"))) == "success"
