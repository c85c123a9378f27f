"""GetAgentContext on real files: rule kinds, nested AGENTS.md, CLAUDE.md by flag, skills and
subagents from home and workspace, broken and oversized files, symlinks out of the workspace,
the agent's mode and reflections. The daemon serves a temp workspace in the test's event loop
(tests/inprocess.py) and is called by the real client over a loopback socket."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from agent.v1.agent_pb2 import ReflectArgs, ReflectToolCall, SwitchModeArgs, SwitchModeToolCall
from agent.v1.context_pb2 import (
    GetAgentContextRequest,
    GetAgentContextResponse,
    RuleKind,
    WatchAgentContextRequest,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.guards.redaction import SECRET_NAMES_VARIABLE
from tests.inprocess import InProcessDaemon, serve_in_process
from tools import agent_context_watch, agent_state


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


@pytest.fixture
def space(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def serving(space: Path, **overrides: Any) -> AsyncIterator[InProcessDaemon]:
    handlers = {
        "reflect_tool_call": agent_state.reflect,
        "switch_mode_tool_call": agent_state.switch_mode,
    }
    async with serve_in_process(handlers, workspace=space, **overrides) as served:
        yield served


@pytest.fixture
async def served(space: Path, home: Path) -> AsyncIterator[InProcessDaemon]:
    async for daemon in serving(space):
        yield daemon


async def context(
    served: InProcessDaemon, *paths: str, agent_id: str = "", requested: tuple[str, ...] = ()
) -> GetAgentContextResponse:
    async with served.client() as client:
        return await client.control.get_agent_context(
            GetAgentContextRequest(paths=paths, agent_id=agent_id, requested_rules=requested),
            headers=client.headers,
        )


def by_name(response: GetAgentContextResponse) -> dict[str, Any]:
    return {rule.name: rule for rule in response.rules}


def diagnostics(response: GetAgentContextResponse) -> str:
    return "\n".join(f"{item.path}: {item.message}" for item in response.diagnostics)


async def test_each_cursor_rule_kind(served: InProcessDaemon, space: Path) -> None:
    rules = space / ".cursor" / "rules"
    write(rules / "style.mdc", "---\nalwaysApply: true\n---\nUse tabs.\n")
    write(rules / "typescript.mdc", '---\nglobs: "*.ts, *.tsx"\n---\nStrict TS.\n')
    write(rules / "backend" / "api.md", "---\nglobs:\n  - server/**/*.py\n---\nValidate input.\n")
    write(rules / "migrations.mdc", "---\ndescription: How to write DB migrations\n---\nSteps.\n")
    write(rules / "release.mdc", "Release checklist.\n")
    write(rules / "notes.txt", "not a rule")
    write(space / ".cursorrules", "Legacy rule.\n")

    response = await context(served, "web/app.ts", "server/api/views.py")
    found = by_name(response)
    assert set(found) == {"style", "typescript", "api", "migrations", "release", ".cursorrules"}
    assert found["style"].kind == RuleKind.RULE_KIND_ALWAYS
    assert found["style"].content == "Use tabs."
    assert found["typescript"].kind == RuleKind.RULE_KIND_AUTO_ATTACHED
    assert list(found["typescript"].globs) == ["*.ts", "*.tsx"]
    assert list(found["typescript"].matched_paths) == ["web/app.ts"]
    assert found["typescript"].content == "Strict TS."
    assert list(found["api"].matched_paths) == ["server/api/views.py"]
    assert found["migrations"].kind == RuleKind.RULE_KIND_AGENT_REQUESTED
    assert found["migrations"].description == "How to write DB migrations"
    assert not found["migrations"].applies and found["migrations"].content == ""
    assert found["release"].kind == RuleKind.RULE_KIND_MANUAL and found["release"].content == ""
    assert found[".cursorrules"].format == "cursorrules"
    assert found[".cursorrules"].content == "Legacy rule."

    other = by_name(await context(served, "README.md"))
    assert not other["typescript"].applies and other["typescript"].content == ""
    assert other["style"].applies

    asked = by_name(await context(served, requested=("migrations", str(rules / "release.mdc"))))
    assert asked["migrations"].content == "Steps."
    assert asked["release"].content == "Release checklist."


async def test_nested_agents_md_applies_under_its_folder(
    served: InProcessDaemon, space: Path
) -> None:
    write(space / "AGENTS.md", "Root instructions.")
    write(space / "pkg" / "AGENTS.md", "Package instructions.")
    write(space / "pkg" / "inner" / "AGENTS.md", "Inner instructions.")
    write(space / "other" / "AGENTS.md", "Other instructions.")
    write(space / "pkg" / ".cursor" / "rules" / "pkg-style.mdc", "---\nglobs: '*.py'\n---\nPkg py.")

    response = await context(served, "pkg/inner/mod.py")
    contents = [(rule.scope, rule.content) for rule in response.rules if rule.format == "agents_md"]
    assert contents == [
        ("", "Root instructions."),
        ("pkg", "Package instructions."),
        ("pkg/inner", "Inner instructions."),
    ]
    nested = by_name(response)["pkg-style"]
    assert nested.scope == "pkg" and list(nested.matched_paths) == ["pkg/inner/mod.py"]

    response = await context(served, "other/x.txt", "top.txt")
    folders = {rule.scope: rule for rule in response.rules if rule.format == "agents_md"}
    assert set(folders) == {"", "other"}
    assert folders["other"].kind == RuleKind.RULE_KIND_FOLDER
    assert list(folders["other"].matched_paths) == ["other/x.txt"]
    assert "pkg-style" not in by_name(response)

    # An absolute path counts the same; one outside the workspace is a diagnostic.
    absolute = await context(served, str(space / "pkg" / "a.py"), "/etc/passwd")
    assert "Package instructions." in [rule.content for rule in absolute.rules]
    assert "/etc/passwd: outside the workspace" in diagnostics(absolute)


def write_claude_files(space: Path, home: Path) -> None:
    write(space / "CLAUDE.md", "Claude root.")
    write(space / ".claude" / "CLAUDE.md", "Claude dot folder.")
    write(space / "CLAUDE.local.md", "Claude local.")
    write(space / "lib" / "CLAUDE.md", "Claude lib.")
    write(space / ".claude" / "rules" / "python.md", "---\npaths: ['**/*.py']\n---\nClaude py.")
    write(home / ".claude" / "CLAUDE.md", "Claude user memory.")


@pytest.mark.parametrize("enabled", [True, False])
async def test_claude_md_only_with_the_flag(space: Path, home: Path, enabled: bool) -> None:
    write_claude_files(space, home)
    write(space / "AGENTS.md", "Agents root.")
    async for served in serving(space, claude_md_enabled=enabled):
        response = await context(served, "lib/x.py")
    claude = {rule.content for rule in response.rules if rule.format.startswith("claude")}
    expected = {
        "Claude root.",
        "Claude dot folder.",
        "Claude local.",
        "Claude lib.",
        "Claude py.",
        "Claude user memory.",
    }
    assert claude == (expected if enabled else set())
    assert "Agents root." in {rule.content for rule in response.rules}


@pytest.mark.parametrize("enabled", [True, False])
async def test_cloud_rules_only_with_the_flag(
    space: Path, home: Path, tmp_path: Path, enabled: bool
) -> None:
    """The repository's and the VM's cloud rules, in Cursor's rule format; one symlinked out of
    its root (the agent can write the workspace) is skipped."""
    write(space / ".cursor" / "cloud-rules" / "ci.mdc", "---\nalwaysApply: true\n---\nUse xvfb.")
    write(space / ".cursor" / "cloud-rules" / "py.mdc", "---\nglobs: '*.py'\n---\nRun pytest.")
    write(home / ".cursor" / "cloud-rules" / "vm.md", "---\nalwaysApply: true\n---\nOpen a PR.")
    outside = write(tmp_path / "elsewhere.mdc", "---\nalwaysApply: true\n---\nNot reviewed.")
    (space / ".cursor" / "cloud-rules" / "planted.mdc").symlink_to(outside)
    async for served in serving(space, cloud_rules_enabled=enabled):
        response = await context(served, "lib/x.py", "README.md")
    cloud = {rule.name: rule for rule in response.rules if rule.format == "cursor_cloud_rule"}
    if not enabled:
        assert cloud == {}
        return
    assert set(cloud) == {"ci", "py", "vm"}
    assert cloud["ci"].applies and cloud["ci"].content == "Use xvfb."
    assert cloud["ci"].kind == RuleKind.RULE_KIND_ALWAYS
    assert cloud["py"].kind == RuleKind.RULE_KIND_AUTO_ATTACHED
    assert list(cloud["py"].matched_paths) == ["lib/x.py"]
    assert cloud["vm"].path == str(home / ".cursor" / "cloud-rules" / "vm.md")
    assert "Not reviewed." not in {rule.content for rule in response.rules}
    assert any(item.path.endswith("planted.mdc") for item in response.diagnostics)


async def test_skills_and_subagents_from_home_and_workspace(
    served: InProcessDaemon, space: Path, home: Path
) -> None:
    deploy = home / ".cursor" / "skills" / "deploy"
    write(deploy / "SKILL.md", "---\nname: deploy\ndescription: Ship it\n---\nRun scripts/go.sh")
    write(deploy / "scripts" / "go.sh", "echo go")
    write(deploy / "reference.md", "ref")
    write(
        space / ".cursor" / "skills" / "lint" / "SKILL.md",
        "---\nname: lint\ndescription: Lint\n---\n",
    )
    write(
        space / ".claude" / "skills" / "review" / "SKILL.md",
        "---\nname: review\ndescription: Review code\n---\n",
    )
    write(
        space / ".cursor" / "agents" / "reviewer.md",
        "---\nname: reviewer\ndescription: Reviews diffs\nmodel: fast\nreadonly: true\n"
        "tools: [read, grep]\n---\nYou review.\n",
    )
    write(
        space / ".claude" / "agents" / "tester.md",
        "---\nname: tester\ndescription: Runs tests\ntools: Bash, Read\n---\nYou test.\n",
    )
    write(home / ".cursor" / "agents" / "helper.md", "---\ndescription: Helps\n---\nYou help.\n")
    write(home / ".cursor" / "agents" / "reviewer.md", "---\nname: reviewer\n---\nHome one.\n")

    response = await context(served)
    skills = {skill.name: skill for skill in response.skills}
    assert set(skills) == {"deploy", "lint", "review"}
    assert skills["deploy"].origin == "home" and skills["deploy"].description == "Ship it"
    assert sorted(skills["deploy"].files) == ["reference.md", "scripts/go.sh"]
    assert skills["deploy"].path == str(deploy / "SKILL.md")
    assert skills["lint"].origin == "workspace"

    agents = {agent.name: agent for agent in response.subagents}
    assert set(agents) == {"reviewer", "tester", "helper"}
    reviewer = agents["reviewer"]
    assert (reviewer.origin, reviewer.model, reviewer.readonly) == ("workspace", "fast", True)
    assert list(reviewer.tools) == ["read", "grep"] and reviewer.prompt == "You review."
    assert list(agents["tester"].tools) == ["Bash", "Read"] and not agents["tester"].readonly
    assert agents["helper"].origin == "home" and agents["helper"].prompt == "You help."
    assert "'reviewer' is also defined by" in diagnostics(response)


async def test_broken_front_matter_is_a_diagnostic_not_a_failure(
    served: InProcessDaemon, space: Path
) -> None:
    rules = space / ".cursor" / "rules"
    write(rules / "good.mdc", "---\nalwaysApply: true\n---\nGood.")
    write(rules / "broken.mdc", "---\ndescription: [unclosed\n---\nBroken.")
    write(rules / "wrong-type.mdc", "---\nalwaysApply: 'yes'\n---\nWrong.")
    write(rules / "list.mdc", "---\n- a\n- b\n---\nA list.")
    write(space / ".cursor" / "agents" / "bad.md", "---\nreadonly: maybe\n---\nx")
    write(space / ".cursor" / "skills" / "nodesc" / "SKILL.md", "---\nname: nodesc\n---\n")
    write(rules / "latin1.mdc", "")
    (rules / "latin1.mdc").write_bytes(b"caf\xe9")

    response = await context(served)
    assert [rule.name for rule in response.rules] == ["good"]
    text = diagnostics(response)
    assert f"{rules / 'broken.mdc'}: broken front matter (line" in text
    assert "'alwaysApply' must be true or false" in text
    assert f"{rules / 'list.mdc'}: broken front matter: it must be a YAML mapping" in text
    assert "'readonly' must be true or false" in text
    assert "SKILL.md has no 'description'" in text
    assert f"{rules / 'latin1.mdc'}: not read: not UTF-8 text" in text


async def test_a_10_mb_rules_file_is_diagnosed_not_read(
    served: InProcessDaemon, space: Path
) -> None:
    rules = space / ".cursor" / "rules"
    write(rules / "huge.mdc", "---\nalwaysApply: true\n---\n" + "x" * (10 * 1024 * 1024))
    write(space / "AGENTS.md", "y" * (300 * 1024))
    write(rules / "small.mdc", "---\nalwaysApply: true\n---\nSmall.")

    response = await context(served)
    assert [rule.content for rule in response.rules] == ["Small."]
    text = diagnostics(response)
    assert f"{rules / 'huge.mdc'}: not read: 1048578" in text
    assert f"{space / 'AGENTS.md'}: not read: 307200 bytes" in text
    assert response.ByteSize() < 64 * 1024


async def test_injected_secrets_are_redacted_with_redaction_on(
    space: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("DEPLOY_KEY", secret)
    monkeypatch.setenv(SECRET_NAMES_VARIABLE, "DEPLOY_KEY")
    write(space / "AGENTS.md", f"Deploy with {secret} please.")
    write(
        space / ".cursor" / "agents" / "ops.md", f"---\ndescription: uses {secret}\n---\n{secret}"
    )
    async for served in serving(space, secret_redaction_enabled=True):
        for _ in range(2):  # the second answer comes from the cache
            response = await context(served)
            assert response.rules[0].content == "Deploy with [REDACTED] please."
            assert response.subagents[0].description == "uses [REDACTED]"
            assert response.subagents[0].prompt == "[REDACTED]"
            assert secret not in str(response)


async def test_an_answer_carries_at_most_4_mib_of_rules(
    served: InProcessDaemon, space: Path
) -> None:
    rules = space / ".cursor" / "rules"
    for index in range(20):
        write(rules / f"r{index:02d}.mdc", "---\nalwaysApply: true\n---\n" + "z" * 250_000)
    response = await context(served)
    carried = [rule.name for rule in response.rules if rule.content]
    assert carried == [f"r{index:02d}" for index in range(16)]
    assert all(rule.applies for rule in response.rules)
    assert f"{rules / 'r19.mdc'}: applies, but its content is left out" in diagnostics(response)
    assert response.ByteSize() < 5 * 1024 * 1024


async def test_rules_symlinked_out_of_the_workspace_are_not_read(
    served: InProcessDaemon, space: Path, tmp_path: Path
) -> None:
    """The agent can write the workspace: a link from it to elsewhere must not turn files nobody
    reviewed (or secrets) into rules. Links that stay inside the workspace are fine."""
    outside = tmp_path / "outside"
    write(outside / "rules" / "evil.mdc", "---\nalwaysApply: true\n---\nOutside rules folder.")
    write(outside / "secret.txt", "Outside file.")
    (space / ".cursor").mkdir()
    (space / ".cursor" / "rules").symlink_to(outside / "rules")
    (space / "AGENTS.md").symlink_to(outside / "secret.txt")
    write(space / "shared" / "team.mdc", "---\nalwaysApply: true\n---\nShared inside.")
    (space / "pkg").mkdir()
    (space / "pkg" / ".cursor").mkdir()
    (space / "pkg" / ".cursor" / "rules").symlink_to(space / "shared")
    (space / ".cursor" / "agents").mkdir()
    (space / ".cursor" / "agents" / "spy.md").symlink_to(outside / "secret.txt")

    os.link(outside / "secret.txt", space / ".cursorrules")
    (space / "pkg" / "AGENTS.md").symlink_to("/proc/self/environ")
    os.mkfifo(space / "CLAUDE.md")

    response = await context(served, "pkg/a.py")
    contents = [rule.content for rule in response.rules]
    assert contents == ["Shared inside."]
    assert not response.subagents
    text = diagnostics(response)
    assert f"{space / '.cursor' / 'rules'}: not read: the folder points outside" in text
    assert f"{space / 'AGENTS.md'}: not read: it points outside {space}" in text
    assert f"{space / '.cursor' / 'agents' / 'spy.md'}: not read: it points outside" in text
    assert f"{space / '.cursorrules'}: not read: the file has other hard links" in text
    assert f"{space / 'pkg' / 'AGENTS.md'}: not read:" in text
    assert f"{space / 'CLAUDE.md'}: not read: not a regular file" in text


async def test_edits_are_seen_on_the_next_call(served: InProcessDaemon, space: Path) -> None:
    rules = space / ".cursor" / "rules"
    rule = write(rules / "a.mdc", "---\nalwaysApply: true\n---\nFirst.")
    assert [r.content for r in (await context(served)).rules] == ["First."]
    rule.write_text("---\nalwaysApply: true\n---\nSecond, longer.")
    write(rules / "b.mdc", "---\nalwaysApply: true\n---\nNew file.")
    assert [r.content for r in (await context(served)).rules] == ["Second, longer.", "New file."]
    rule.unlink()
    assert [r.content for r in (await context(served)).rules] == ["New file."]
    # A nested AGENTS.md created where none was is found by the same request asked again.
    assert len((await context(served, "deep/er/file.py")).rules) == 1
    write(space / "deep" / "AGENTS.md", "Deep.")
    asked = await context(served, "deep/er/file.py")
    assert [r.content for r in asked.rules] == ["New file.", "Deep."]


async def test_a_rule_hidden_by_cursorignore_is_not_read(
    served: InProcessDaemon, space: Path
) -> None:
    rules = space / ".cursor" / "rules"
    write(rules / "open.mdc", "---\nalwaysApply: true\n---\nOpen.")
    write(rules / "private.mdc", "---\nalwaysApply: true\n---\nPrivate.")
    assert [r.content for r in (await context(served)).rules] == ["Open.", "Private."]
    write(space / ".cursorignore", ".cursor/rules/private.mdc\n")
    response = await context(served)
    assert [r.content for r in response.rules] == ["Open."]
    assert "hidden from the agent by .cursorignore" in diagnostics(response)


async def test_mode_and_reflections_read_back(served: InProcessDaemon) -> None:
    async with served.client() as client:
        await client.run(
            ToolCall(reflect_tool_call=ReflectToolCall(args=ReflectArgs(next_steps="run tests"))),
            agent_id="agent-1",
        )
        switched = await client.run(
            ToolCall(
                switch_mode_tool_call=SwitchModeToolCall(args=SwitchModeArgs(target_mode_id="ask"))
            ),
            agent_id="agent-1",
        )
    assert switched.result is not None
    assert switched.result.switch_mode_tool_call.result.WhichOneof("result") == "success"
    response = await context(served, agent_id="agent-1")
    assert response.mode == "ask"
    assert [item.next_steps for item in response.reflections] == ["run tests"]
    assert response.reflections[0].at_ms > 0
    other = await context(served, agent_id="agent-2")
    assert other.mode == "agent" and not other.reflections
    assert (await context(served)).mode == ""


async def test_bad_requests_get_a_typed_answer(served: InProcessDaemon, space: Path) -> None:
    write(space / "AGENTS.md", "Root.")
    response = await context(served, "a\x00b/c.py", "ok.py")
    assert [rule.content for rule in response.rules] == ["Root."]
    assert "contains a NUL byte: ignored" in diagnostics(response)
    with pytest.raises(ConnectError) as refused:
        await context(served, *[f"f{index}.py" for index in range(1001)])
    assert refused.value.code == Code.INVALID_ARGUMENT
    assert "1001 paths: at most 1000 per request" in refused.value.message


async def test_watch_reports_a_skill_added_in_home_after_a_resubscribe(
    served: InProcessDaemon, home: Path
) -> None:
    (home / ".cursor" / "skills").mkdir(parents=True)
    async with served.client() as client:
        request, headers = WatchAgentContextRequest(), client.headers
        first = client.control.watch_agent_context(request, headers=headers)
        opened = await asyncio.wait_for(anext(first), 20)
        assert str((home / ".cursor").resolve()) in opened.watching
        await first.aclose()  # type: ignore[attr-defined]
        second = client.control.watch_agent_context(request, headers=headers)
        await asyncio.wait_for(anext(second), 20)
        write(home / ".cursor" / "skills" / "deploy" / "SKILL.md", "---\nname: d\n---\n")
        change = await asyncio.wait_for(anext(second), 20)
        assert list(change.kinds) == ["skills"]
        await second.aclose()  # type: ignore[attr-defined]


async def test_watch_reports_a_cloud_rule_written_in_new_folders(
    served: InProcessDaemon, space: Path
) -> None:
    """`.cursor/cloud-rules/` made with the file in one go: the folders are made before the
    watch can reach them, so the file has no event of its own and is found in the new folder."""
    async with served.client() as client:
        watch = client.control.watch_agent_context(
            WatchAgentContextRequest(), headers=client.headers
        )
        await asyncio.wait_for(anext(watch), 20)
        write(space / ".cursor" / "cloud-rules" / "ci.mdc", "---\nalwaysApply: true\n---\n")
        change = await asyncio.wait_for(anext(watch), 20)
        assert list(change.kinds) == ["rules"]
        assert [path.endswith(".cursor/cloud-rules/ci.mdc") for path in change.paths] == [True]
        await watch.aclose()  # type: ignore[attr-defined]


async def test_watch_does_not_look_into_a_symlinked_folder(
    served: InProcessDaemon, space: Path, tmp_path: Path
) -> None:
    """A new folder is looked into for context files, but not one that is a symlink (the agent
    could point it at `/`, or at another checkout)."""
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / ".cursor" / "rules" / "theirs.mdc", "---\nalwaysApply: true\n---\n")
    (space / ".cursor" / "rules").mkdir(parents=True)
    async with served.client() as client:
        watch = client.control.watch_agent_context(
            WatchAgentContextRequest(), headers=client.headers
        )
        await asyncio.wait_for(anext(watch), 20)
        (space / "linked").symlink_to(elsewhere)
        write(space / ".cursor" / "rules" / "ours.mdc", "---\nalwaysApply: true\n---\n")
        change = await asyncio.wait_for(anext(watch), 20)
        await watch.aclose()  # type: ignore[attr-defined]
    assert [Path(path).name for path in change.paths] == ["ours.mdc"]


async def test_a_watch_that_cannot_start_answers_unavailable(
    served: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_watch(*paths: str, **options: Any) -> AsyncIterator[set[Any]]:
        raise OSError("OS file watch limit reached")
        yield set()

    monkeypatch.setattr(agent_context_watch, "awatch", no_watch)
    async with served.client() as client:
        stream = client.control.watch_agent_context(
            WatchAgentContextRequest(), headers=client.headers
        )
        with pytest.raises(ConnectError) as failed:
            await asyncio.wait_for(anext(stream), 20)
    assert failed.value.code == Code.UNAVAILABLE
    assert "OS file watch limit reached" in failed.value.message
