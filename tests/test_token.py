"""The auth token out of the agent's reach: no child of the daemon sees it (agent shell, sandboxed
shell, hook, linter, ripgrep, MCP server), the daemon's /proc entries do not show it, token
sources."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.v1.control_pb2 import UpdateEnvironmentVariablesRequest
from agent.v1.shell_pb2 import SandboxPolicy
from tests.daemon_process import RunningDaemon, running_daemon
from tests.guards_support import call, result_of, shell, write_config
from tests.test_mcp import run_mcp, stdio_server, texts

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
UNSANDBOXED = SandboxPolicy(type=SandboxPolicy.TYPE_INSECURE_NONE)
SANDBOXED = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE)


def dumping_wrapper(path: Path, dump: Path, then: str) -> str:
    """An executable at `path` that writes its environment to `dump`, then runs `then`."""
    path.write_text(f"#!/bin/sh\nenv > {dump}\n{then}\n")
    path.chmod(0o755)
    return str(path)


def proc_entry(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_bytes().decode(errors="replace")


def shell_text(result: object) -> str:
    case = result.WhichOneof("result")  # type: ignore[attr-defined]
    part = getattr(result, case)
    return str(part.stdout) + str(part.stderr)


@pytest.fixture(params=["env", "file"])
def token_daemon(
    request: pytest.FixtureRequest, workspace: Path, tmp_path: Path
) -> Iterator[RunningDaemon]:
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    real_rg = shutil.which("rg") or str(Path(sys.executable).parent / "rg")
    rg = dumping_wrapper(tmp_path / "rg-wrapper", dumps / "rg.env", f'exec {real_rg} "$@"')
    mcp_config = json.dumps({"mcpServers": {"demo": stdio_server()}})
    with running_daemon(
        workspace,
        tmp_path / "state",
        "--rg-path", rg,
        "--sandbox-enabled",
        "--mcp-config", mcp_config,
        token_by=request.param,
    ) as daemon:  # fmt: skip
        yield daemon


async def test_no_child_of_the_daemon_sees_the_token(
    token_daemon: RunningDaemon, tmp_path: Path
) -> None:
    daemon, token = token_daemon, token_daemon.token
    dumps = tmp_path / "dumps"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dumping_wrapper(bin_dir / "shellcheck", dumps / "lint.env", "echo '{\"comments\":[]}'")
    (daemon.workspace / "a.sh").write_text("#!/bin/sh\necho hi\n")
    write_config(
        daemon.workspace / ".cursor" / "hooks.json",
        {"version": 1, "hooks": {"beforeShellExecution": [{"command": f"env > {dumps}/hook.env"}]}},
    )
    async with daemon.client() as client:
        # The wrapped linter is found through the PATH given here: it reaches helpers too.
        path = f"{bin_dir}:{os.environ['PATH']}"
        await client.control.update_environment_variables(
            UpdateEnvironmentVariablesRequest(env={"PATH": path, "GIVEN_LATER": "yes"}),
            headers=client.headers,
        )
        plain = result_of(
            await client.run(
                shell(
                    "env",
                    requested_sandbox_policy=UNSANDBOXED,
                )
            )
        )
        daemon_environ = result_of(
            await client.run(
                shell("tr '\\0' '\\n' < /proc/$PPID/environ", requested_sandbox_policy=UNSANDBOXED)
            )
        )
        confined = result_of(await client.run(shell("env", requested_sandbox_policy=SANDBOXED)))
        lints = result_of(await client.run(call("read_lints_tool_call", paths=["a.sh"])))
        grep = result_of(await client.run(call("grep_tool_call", pattern="echo", path=".")))
        mcp_server_pid = int(texts(await run_mcp(client, "demo-pid"))[0])
    assert plain.WhichOneof("result") == "success", plain
    assert confined.WhichOneof("result") == "success", confined
    assert lints.WhichOneof("result") == "success", lints
    assert grep.WhichOneof("result") == "success", grep
    seen = {
        "agent shell": shell_text(plain),
        "sandboxed shell": shell_text(confined),
        "hook": (dumps / "hook.env").read_text(),
        "linter": (dumps / "lint.env").read_text(),
        "ripgrep": (dumps / "rg.env").read_text(),
        "MCP server": proc_entry(mcp_server_pid, "environ").replace("\0", "\n"),
        "language server": proc_entry(
            daemon.children_running("bash-language-server")[0], "environ"
        ).replace("\0", "\n"),
    }
    for child, environment in seen.items():
        assert "GIVEN_LATER=yes" in environment, child
        assert token not in environment, child
        assert "EXEC_DAEMON_AUTH_TOKEN" not in environment, child
    # Nor do the daemon's own /proc entries show it, read by a root agent (dumpable or not).
    assert "PATH=" in shell_text(daemon_environ)
    assert token not in shell_text(daemon_environ)
    assert token not in proc_entry(daemon.process.pid, "environ")
    assert token not in proc_entry(daemon.process.pid, "cmdline")


def unprivileged_read(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NOBODY, "cat", path], capture_output=True, text=True, timeout=30, check=False
    )


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder the unprivileged user may enter (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="token-test-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def nobody_runtime_folder() -> Iterator[Path]:
    """What a login gives a user (systemd-logind's /run/user/<uid>): a folder of nobody's own,
    mode 0700, under folders only root writes, where its daemon keeps its private state root
    (exec_daemon/kernel/state_root.py refuses one under /tmp, where the test's home lies)."""
    parent = Path(tempfile.mkdtemp(prefix="exec-daemon-test-", dir="/run"))
    parent.chmod(0o755)
    runtime = parent / "nobody"
    runtime.mkdir(mode=0o700)
    shutil.chown(runtime, user="nobody", group="nogroup")
    yield runtime
    shutil.rmtree(parent, ignore_errors=True)


async def test_the_daemon_proc_entries_are_closed_to_its_own_user(
    open_folder: Path, nobody_runtime_folder: Path
) -> None:
    """The daemon and its agent run as one unprivileged user (the VM image's `ubuntu`): that
    user's other processes cannot read the daemon's environ or memory (PR_SET_DUMPABLE 0),
    while they can read those of the daemon's children (so the check can fail)."""
    workspace, state, home = (open_folder / name for name in ("workspace", "state", "home"))
    for folder in (workspace, state, home):
        folder.mkdir()
        folder.chmod(0o777)  # mkdir's mode is masked by the umask
    argv = [*NOBODY, sys.executable, "-m", "exec_daemon"]
    env = {"HOME": str(home), "XDG_RUNTIME_DIR": str(nobody_runtime_folder)}
    with running_daemon(workspace, state, argv=argv, env=env) as daemon:
        async with daemon.client() as client:
            answer = result_of(await client.run(shell("echo $$; sleep 30 & echo $!")))
        shell_pid, sleeper = shell_text(answer).split()[:2]
        daemon_pid = _child_of(daemon.process.pid)
        for entry in ("environ", "mem"):
            refused = unprivileged_read(f"/proc/{daemon_pid}/{entry}")
            assert refused.returncode != 0
            assert "Permission denied" in refused.stderr, entry
        readable = unprivileged_read(f"/proc/{sleeper}/environ")
        assert readable.returncode == 0, readable.stderr
        assert daemon.token not in readable.stdout
        assert shell_pid


def _child_of(setpriv_pid: int) -> int:
    """setpriv execs the daemon: same pid."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if "exec_daemon" in Path(f"/proc/{setpriv_pid}/cmdline").read_text():
            return setpriv_pid
        time.sleep(0.02)
    raise AssertionError("setpriv did not exec the daemon")


def serve_with_token_file(tmp_path: Path, mode: int) -> subprocess.CompletedProcess[str]:
    token_file = tmp_path / "token"
    token_file.write_text("a-token-of-32-characters-or-more\n")
    token_file.chmod(mode)
    return subprocess.run(
        [sys.executable, "-m", "exec_daemon", "serve", "--workspace", str(tmp_path),
         "--auth-token-file", str(token_file), "--port", "1"],
        capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_token_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    refused = serve_with_token_file(tmp_path, mode)
    assert refused.returncode == 2
    assert f"may be read by others (mode {stat.S_IMODE(mode):04o}); chmod 600 it" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_an_empty_or_missing_token_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text(" \n")
    empty.chmod(0o600)
    for path, why in ((empty, "is empty"), (tmp_path / "missing", "No such file")):
        refused = subprocess.run(
            [sys.executable, "-m", "exec_daemon", "serve", "--auth-token-file", str(path)],
            capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert refused.returncode == 2
        assert why in refused.stderr
        assert "Traceback" not in refused.stderr


async def test_tokens_on_argv_work_and_are_warned_about(workspace: Path, tmp_path: Path) -> None:
    trace_token = "trace-token-of-some-length"
    with running_daemon(
        workspace, tmp_path / "state", "--trace-auth-token", trace_token, token_by="argv"
    ) as daemon:
        async with daemon.client() as client:
            assert (await client.ping()).workspace == str(workspace)
            # A session started before the update gets it through its next call's preamble.
            result_of(await client.run(shell("true")))
            # Under other names (the orchestrator may set anything), the values are still dropped.
            await client.control.update_environment_variables(
                UpdateEnvironmentVariablesRequest(
                    env={"COPY": daemon.token, "TRACE_COPY": f"Bearer {trace_token}", "KEPT": "1"}
                ),
                headers=client.headers,
            )
            seen = shell_text(result_of(await client.run(shell("env"))))
        log = daemon.log()
    assert "--auth-token is visible to every process" in log
    assert "--trace-auth-token is visible to every process" in log
    assert daemon.token not in log
    assert "KEPT=1" in seen
    assert daemon.token not in seen and trace_token not in seen


async def test_the_token_file_is_neither_read_nor_found_nor_written_by_file_tools(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(workspace, tmp_path / "state", token_by="file") as daemon:
        token_file = daemon.state_dir / "auth-token"
        async with daemon.client() as client:
            read = result_of(await client.run(call("read_tool_call", path=str(token_file))))
            assert read.WhichOneof("result") != "success", read
            assert daemon.token not in str(read)
            grep_call = call(
                "grep_tool_call", pattern=daemon.token[:16], path=str(daemon.state_dir)
            )
            grep = result_of(await client.run(grep_call))
            assert daemon.token[:16] not in str(grep).replace(f'pattern: "{daemon.token[:16]}"', "")
            edit_call = call("edit_tool_call", path=str(token_file), contents="mine\n")
            edit = result_of(await client.run(edit_call))
            assert edit.WhichOneof("result") != "success", edit
        assert token_file.read_text().strip() == daemon.token


async def test_a_hard_link_to_the_token_file_is_neither_read_nor_searched(
    workspace: Path, tmp_path: Path
) -> None:
    """The read and search tools check the file (device, inode), not only its path: a hard link
    in the workspace to the token file reads as refused and greps as nothing."""
    with running_daemon(workspace, tmp_path / "state", token_by="file") as daemon:
        token_file = daemon.state_dir / "auth-token"
        (workspace / "notes").mkdir()
        os.link(token_file, workspace / "notes" / "innocent.txt")
        os.link(token_file, workspace / "also.md")
        probe = daemon.token[:16]
        async with daemon.client() as client:
            for linked in (workspace / "notes" / "innocent.txt", workspace / "also.md"):
                read = result_of(await client.run(call("read_tool_call", path=str(linked))))
                assert read.WhichOneof("result") != "success", read
                assert probe not in str(read)
            for mode in ("content", "files_with_matches", "count"):
                grep_call = call(
                    "grep_tool_call", pattern=probe, path=str(workspace), output_mode=mode
                )
                grep = result_of(await client.run(grep_call))
                assert grep.WhichOneof("result") == "success", grep
                assert grep.success.total_files == 0, grep
                assert probe not in str(grep).replace(f'pattern: "{probe}"', "")
            # A plain copy is an ordinary file the agent made: read like any other.
            (workspace / "copy.txt").write_text("not the token\n")
            os.link(workspace / "copy.txt", workspace / "copy-link.txt")
            read = result_of(
                await client.run(call("read_tool_call", path=str(workspace / "copy-link.txt")))
            )
            assert read.WhichOneof("result") == "success", read


async def test_a_sandboxed_shell_cannot_hard_link_the_token_file(
    workspace: Path, tmp_path: Path
) -> None:
    """The token file lies in /tmp here, which sandboxed commands may write: it is still not
    linked into the workspace (or /tmp) from inside, nor read."""
    with running_daemon(
        workspace, tmp_path / "state", "--sandbox-enabled", token_by="file"
    ) as daemon:  # fmt: skip
        token_file = daemon.state_dir / "auth-token"
        async with daemon.client() as client:
            for target in (workspace / "linked", tmp_path / "linked"):
                # The positive control: a file beside the target is linked and read by the same
                # command (the workspace is a mount of its own: links from outside it fail).
                decoy = target.with_name("decoy")
                decoy.write_text("decoy-text\n")
                command = (
                    f"ln {decoy} {target}-decoy; cat {target}-decoy;"
                    f" ln {token_file} {target}; cat {token_file}"
                )
                ran = result_of(
                    await client.run(shell(command, requested_sandbox_policy=SANDBOXED))
                )
                assert "decoy-text" in shell_text(ran), ran
                assert target.with_name("linked-decoy").samefile(decoy), ran
                assert daemon.token not in shell_text(ran), ran
                assert not target.exists(), ran
