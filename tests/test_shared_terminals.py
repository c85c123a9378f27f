"""Shared terminals (exec_daemon/terminals/tmux.py) on a real daemon with real tmux: the agent's
shell reads an environment.json terminal's screen and types into it while a person watches over
the PTY WebSocket; viewers of different sizes; and a sandboxed shell cannot reach the tmux server.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.shell_pb2 import SandboxPolicy, ShellArgs, ShellResult, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import eventually, text_of
from tests.sandbox_harness import processes_with_argument
from tests.test_pty_server import connect, list_terminals

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

# Like `npm run watch`: prints as it goes and reacts to what is typed.
WATCH = (
    "echo watching-for-changes; i=0; while read -r line; do i=$((i+1)); "
    'echo "rebuilt-$i after $line"; done'
)
# Like a dev server: runs until interrupted.
SERVE = "echo serving-on-3000; sleep 600"
RW = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE)
NONE = SandboxPolicy(type=SandboxPolicy.TYPE_INSECURE_NONE)


def write_environment(workspace: Path, terminals: list[dict[str, str]]) -> None:
    (workspace / ".cursor").mkdir(exist_ok=True)
    (workspace / ".cursor" / "environment.json").write_text(json.dumps({"terminals": terminals}))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("shared")
    (root / "workspace").mkdir()
    write_environment(
        root / "workspace",
        [{"name": "watch", "command": WATCH}, {"name": "serve", "command": SERVE}],
    )
    with running_daemon(root / "workspace", root / "state") as running:
        yield running


async def agent_shell(daemon: RunningDaemon, command: str, **kwargs: Any) -> str:
    """What the agent's shell tool prints for `command` (stdout and stderr)."""
    call = ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command=command, **kwargs)))
    async with daemon.client() as client:
        outcome = await client.run(call)
    assert outcome.result is not None, outcome.error
    result: ShellResult = outcome.result.shell_tool_call.result
    case = result.WhichOneof("result")
    assert case in ("success", "failure"), result
    part = getattr(result, case)
    return str(part.stdout) + str(part.stderr)


async def shared_terminal(daemon: RunningDaemon, name: str) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        return next((t for t in list_terminals(daemon) if t["name"] == name), None)

    return await eventually(find, what=f"terminal {name!r} to be listed")


async def test_agent_reads_and_types_into_an_environment_terminal_a_person_watches(
    daemon: RunningDaemon,
) -> None:
    listed = await shared_terminal(daemon, "watch")
    shared = listed["shared"]
    assert shared is not None and shared["tmux_session"] == "watch"
    async with connect(daemon, f"/terminals/{listed['id']}") as person:
        await person.until(b"watching-for-changes")
        # The agent reads the screen with the command the listing (and the log header) gives.
        screen = await agent_shell(daemon, shared["read_screen"])
        assert "watching-for-changes" in screen
        # ... and types into it; the person sees the program react, live.
        send = f"tmux -S {shared['tmux_socket']} send-keys -t =watch: 'src/app.ts' Enter"
        await agent_shell(daemon, send)
        await person.until(b"rebuilt-1 after src/app.ts")
        # What the person types, the agent reads.
        await person.ws.send(b"from-the-person\r")
        await person.until(b"rebuilt-2 after from-the-person")
        assert "rebuilt-2 after from-the-person" in await agent_shell(daemon, shared["read_screen"])
    # The raw output still reaches terminal-<id>.log, after a header naming the commands.
    log_path = Path(listed["log_path"])
    await eventually(lambda: b"rebuilt-2 after from-the-person" in log_path.read_bytes())
    assert shared["read_screen"] in await asyncio.to_thread(log_path.read_text)


async def test_an_interrupted_environment_terminal_leaves_a_shell_not_a_dead_pane(
    daemon: RunningDaemon,
) -> None:
    listed = await shared_terminal(daemon, "serve")
    shared = listed["shared"]
    async with connect(daemon, f"/terminals/{listed['id']}") as person:
        await person.until(b"serving-on-3000")
        await person.ws.send(b"\x03")  # the person's Ctrl-C
        await person.until(b"a shell takes its place")
        # The person types into the shell that took the server's place ...
        await person.ws.send(b"echo person-$((6*7))\r")
        await person.until(b"person-42")
        # ... and so does the agent; both see the server's output above it.
        keys = f"tmux -S {shared['tmux_socket']} send-keys -t =serve: 'echo agent-$((5*5))' Enter"
        await agent_shell(daemon, keys)
        await person.until(b"agent-25")
        screen = await agent_shell(daemon, shared["read_screen"])
        assert "serving-on-3000" in screen and "ended with code 130" in screen, screen
        assert "Pane is dead" not in screen
    [again] = [t for t in list_terminals(daemon) if t["id"] == listed["id"]]
    assert not again["exited"]


async def test_a_terminal_a_person_opens_is_shared_with_the_agent(daemon: RunningDaemon) -> None:
    async with connect(daemon, "/terminals/new?cols=90&rows=20&name=my+shell&shared=1") as person:
        listed = next(t for t in list_terminals(daemon) if t["id"] == person.id)
        shared = listed["shared"]
        assert shared["tmux_session"] == "my-shell"
        await person.ws.send(b"echo typed-by-$((40+2))\r")
        await person.until(b"typed-by-42")
        assert "typed-by-42" in await agent_shell(daemon, shared["read_screen"])
        await agent_shell(
            daemon, f"tmux -S {shared['tmux_socket']} send-keys -t =my-shell: 'exit 3' Enter"
        )
        await person.until_closed()
        assert person.controls[-1] == {"type": "exit", "code": 3}


async def test_the_terminal_takes_the_smallest_viewer_size(daemon: RunningDaemon) -> None:
    async with connect(daemon, "/terminals/new?cols=120&rows=40") as big:
        await big.ws.send(json.dumps({"type": "resize", "cols": 120, "rows": 40}))
        assert await big.control() == {"type": "size", "cols": 120, "rows": 40}
        async with connect(daemon, f"/terminals/{big.id}") as small:
            await small.ws.send(json.dumps({"type": "resize", "cols": 70, "rows": 20}))
            # Both are told the new size; the big one's window no longer decides alone.
            assert await small.control() == {"type": "size", "cols": 70, "rows": 20}
            assert await big.control() == {"type": "size", "cols": 70, "rows": 20}
            # The big viewer resizing its window does not break the small one's screen.
            await big.ws.send(json.dumps({"type": "resize", "cols": 150, "rows": 50}))
            assert await big.control() == {"type": "size", "cols": 70, "rows": 20}
            await small.ws.send(b"stty size\r")
            await small.until(b"20 70\r\n")
        # The small viewer left: the terminal grows to what the remaining one offers.
        assert await big.control() == {"type": "size", "cols": 150, "rows": 50}
        await big.ws.send(b"stty size\r")
        await big.until(b"50 150\r\n")


async def test_rename_and_close_from_a_viewer(daemon: RunningDaemon) -> None:
    async with connect(daemon, "/terminals/new?shared=1&name=first") as viewer:
        await viewer.ws.send(json.dumps({"type": "rename", "name": "  build  "}))
        assert await viewer.control() == {"type": "renamed", "name": "build"}
        [listed] = [t for t in list_terminals(daemon) if t["id"] == viewer.id]
        assert (listed["name"], listed["renamed"]) == ("build", True)
        for bad in ("", "x" * 201, "bell\x07"):
            await viewer.ws.send(json.dumps({"type": "rename", "name": bad}))
            reply = await viewer.control()
            assert reply["type"] == "error" and "printable" in reply["message"]
        session = next(t for t in list_terminals(daemon) if t["id"] == viewer.id)["shared"]
        await viewer.ws.send(json.dumps({"type": "close"}))
        await viewer.until_closed()
    assert viewer.id not in {t["id"] for t in list_terminals(daemon)}
    # Its tmux session is gone too: the agent finds nothing left running.
    gone = await agent_shell(daemon, f"{session['read_screen']} 2>&1; echo rc=$?")
    assert "rc=1" in gone


@pytest.fixture(scope="module")
def sandbox_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("shared-sandbox")
    (root / "workspace").mkdir()
    # More lines than the screen holds: the first ones are history (scrollback).
    server = "seq -f line-%g 1 100; echo booted-$((20+1)); sleep 600"
    write_environment(root / "workspace", [{"name": "server", "command": server}])
    with running_daemon(root / "workspace", root / "state", "--sandbox-enabled") as running:
        yield running


@pytest.mark.parametrize(
    "attempt",
    [
        # tmux itself, by the socket's path
        "tmux -S {socket} new-window 'touch {marker}'",
        # the same socket through a link the agent made elsewhere
        "ln -s {socket} /tmp/link-{tag}.sock; tmux -S /tmp/link-{tag}.sock run-shell 'touch {marker}'",
        # a raw connect(), no tmux client involved
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{socket}')\"",
    ],
)
async def test_a_sandboxed_shell_cannot_use_the_tmux_server(
    sandbox_daemon: RunningDaemon, tmp_path: Path, attempt: str
) -> None:
    listed = await shared_terminal(sandbox_daemon, "server")
    socket_path = listed["shared"]["tmux_socket"]
    marker = tmp_path / "ran-unconfined"
    command = attempt.format(socket=socket_path, marker=marker, tag=uuid.uuid4().hex[:8])
    printed = await agent_shell(
        sandbox_daemon, f"{{ {command}; }} 2>&1; echo rc=$?", requested_sandbox_policy=RW
    )
    # The sockets folder is masked in the sandbox: the socket is not even there.
    assert "rc=1" in printed and any(
        sign in printed for sign in ("no server running", "refused", "No such file")
    ), printed
    assert not marker.exists()
    # Unsandboxed (what a person approves), the same server answers: it was the sandbox.
    sessions = await agent_shell(
        sandbox_daemon,
        f"tmux -S {socket_path} list-sessions -F '#{{session_name}}'",
        requested_sandbox_policy=NONE,
    )
    assert "server" in sessions


async def test_a_sandboxed_shell_reads_a_terminals_screen_and_history_but_cannot_type(
    sandbox_daemon: RunningDaemon,
) -> None:
    listed = await shared_terminal(sandbox_daemon, "server")
    shared = listed["shared"]
    screen_file = shared["screen_file"]
    assert Path(screen_file).parent == Path(listed["log_path"]).parent  # the terminals folder
    assert await asyncio.to_thread(Path(screen_file).exists), "there from the listing on"
    assert screen_file in await asyncio.to_thread(Path(listed["log_path"]).read_text)

    async def sandboxed(command: str) -> str:
        return await agent_shell(
            sandbox_daemon, f"{{ {command}; }} 2>&1; echo rc=$?", requested_sandbox_policy=RW
        )

    async def sandbox_reads(text: str) -> str:
        await eventually(lambda: text in text_of(Path(screen_file)), what=f"{text!r} on screen")
        seen = await sandboxed(f"cat {screen_file}")
        assert text in seen and "rc=0" in seen, seen
        return seen

    # The screen, and the history above it, as text (the pane is 24 rows).
    seen = await sandbox_reads("booted-21")
    assert "line-1\n" in seen and "line-100\n" in seen and "\x1b[" not in seen
    # Typing: the file is read-only there, and the tmux server out of reach.
    refused = await sandboxed(f"echo typed-in-sandbox >> {screen_file}")
    assert "rc=1" in refused and "typed-in-sandbox" not in text_of(Path(screen_file))
    keys = f"tmux -S {shared['tmux_socket']} send-keys -t =server: 'typed-in-sandbox' Enter"
    assert "rc=1" in await sandboxed(keys)
    # Unsandboxed (the control), the same keys reach the pane, and the sandbox then reads them.
    await agent_shell(
        sandbox_daemon, keys.replace("in-sandbox", "unconfined"), requested_sandbox_policy=NONE
    )
    seen = await sandbox_reads("typed-unconfined")
    assert "typed-in-sandbox" not in seen


async def test_stopping_the_daemon_ends_the_tmux_server_and_every_session(tmp_path: Path) -> None:
    marker = f"300.{uuid.uuid4().int % 10**6:06d}"  # seconds, and unique
    # A session whose program ignores SIGHUP, like a careless dev server.
    write_environment(tmp_path, [{"name": "stubborn", "command": f"trap '' HUP; sleep {marker}"}])
    with running_daemon(tmp_path, tmp_path.parent / f"{tmp_path.name}-state") as own:
        socket_path = (await shared_terminal(own, "stubborn"))["shared"]["tmux_socket"]
        async with connect(own, "/terminals/new?shared=1&command=sleep+" + marker) as person:
            await eventually(lambda: len(processes_with_argument(marker)) == 2, what="both sleeps")
            assert own.stop() == 0
            await person.until_closed()
    assert processes_with_argument(marker) == []
    assert processes_with_argument(socket_path) == []
