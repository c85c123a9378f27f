"""The daemon's helpers that parse what the agent supplied, under the sandbox's isolated
confinement (exec_daemon/kernel/sandboxing.py's ISOLATED): ffprobe/ffmpeg on an attachment
(tools/subagent_media.py) and the linters (tools/lints.py).

From inside the media helpers' confinement (and the limits `bounded` adds), a probe program (the
same wrapper with bash in ffmpeg's place) creates nothing outside, reaches no loopback listener
and reads nothing but its input and the system's programs (not the daemon's state root), and
ffmpeg told to write an image elsewhere, or given a playlist naming a file in the state root,
fails; the same programs unconfined (or under the linters' isolation) do all that (the controls). A sandboxed daemon still turns an attached video into frames, and still lints;
the workspace's own node_modules/.bin/tsc, which the agent may write, runs confined there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agent.v1.agent_pb2 import SubagentType
from agent.v1.shell_pb2 import SandboxPolicy
from exec_daemon.kernel.processes import UNCONFINED, Confinement
from exec_daemon.kernel.runner import Completed, run_helper
from exec_daemon.kernel.sandboxing import ISOLATED, ISOLATED_INPUT_ONLY, SandboxDemand
from sandbox.service import SandboxService
from tests.daemon_process import RunningDaemon
from tests.interop import model_daemon_for_module
from tests.model_servers import Final, ScriptedModel
from tests.sandbox_harness import sandbox_service
from tests.test_lints import REPO, read_lints
from tests.test_model_tools import run_task, task_call
from tests.test_subagent_vision import dominant, image_parts, make_video
from tools.subagent_media import bounded, media_env

pytestmark = pytest.mark.timeout(120)

HELPER_SECONDS = 60.0


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder in /tmp: writable by permissions and for an agent's sandboxed command."""
    path = Path(tempfile.mkdtemp(prefix="exec-daemon-media-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[SandboxService]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    state_root = tmp_path / "state"
    state_root.mkdir(mode=0o700)
    running = sandbox_service(workspace, state_root=state_root)
    yield running
    await running.aclose()


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


async def isolated(service: SandboxService, demand: SandboxDemand = ISOLATED) -> Confinement:
    """The linters' confinement, or (ISOLATED_INPUT_ONLY) the media helpers'."""
    decision = await service.decide(None, demand)
    assert not decision.refusal, decision.refusal
    assert decision.confinement.key.startswith("sandbox-")
    return decision.confinement


async def run_media(argv: list[str], confinement: Confinement, fd: int | None = None) -> Completed:
    """`argv` as the attachments run ffmpeg: bounded, under `confinement`."""
    return await run_helper(
        bounded(argv, confinement),
        env=media_env(),
        cwd="/",
        time_limit=HELPER_SECONDS,
        pass_fds=() if fd is None else (fd,),
        confinement=confinement,
    )


def probe_script(folder: Path, port: int) -> str:
    return (
        f"echo ran; mkdir {folder}/made; touch {folder}/touched; ln -s / {folder}/linked;"
        f" ls {folder}; (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected"
    )


async def test_a_probe_in_the_media_confinement_creates_nothing_and_reaches_no_network(
    service: SandboxService, outside: Path, listener: int
) -> None:
    # The control: the same bounded wrapper without the sandbox does both.
    free = await run_media(["bash", "-c", probe_script(outside, listener)], UNCONFINED)
    assert free.stdout.text().split() == ["ran", "linked", "made", "touched", "connected"], free
    os.unlink(outside / "linked")
    os.unlink(outside / "touched")
    os.rmdir(outside / "made")
    confined = await run_media(
        ["bash", "-c", probe_script(outside, listener)],
        await isolated(service, ISOLATED_INPUT_ONLY),
    )
    assert confined.stdout.text().split() == ["ran"], confined
    assert "ermission denied" in confined.stderr.text() or "not permitted" in confined.stderr.text()
    assert os.listdir(outside) == []


async def test_ffmpeg_in_the_media_confinement_cannot_write_an_image_elsewhere(
    service: SandboxService, outside: Path
) -> None:
    video = outside / "clip.mp4"
    make_video(video)
    target = outside / "x.png"
    fd = os.open(video, os.O_RDONLY)
    try:
        write = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin"]
        write += ["-i", f"/proc/self/fd/{fd}", "-frames:v", "1", "-y", str(target)]
        # The control: unconfined and unbounded, ffmpeg reads the descriptor and writes it.
        plain = await run_helper(write, env=media_env(), time_limit=HELPER_SECONDS, pass_fds=(fd,))
        assert plain.returncode == 0 and target.stat().st_size > 0, plain
        target.unlink()
        confined = await run_media(write, await isolated(service, ISOLATED_INPUT_ONLY), fd)
        assert confined.returncode != 0
        assert "Could not open file" in confined.stderr.text(), confined
        assert not target.exists()
        # Without the sandbox, the limits alone leave no image either (at most an empty file).
        limited = await run_media(write, UNCONFINED, fd)
        assert limited.returncode != 0
        assert not target.exists() or target.stat().st_size == 0
        # What the attachments do, in the same confinement: a frame to the output pipe.
        to_pipe = [*write[:-2], "-f", "image2pipe", "-c:v", "mjpeg", "pipe:1"]
        frame = await run_media(to_pipe, await isolated(service, ISOLATED_INPUT_ONLY), fd)
        assert frame.returncode == 0 and frame.stdout.data[:2] == b"\xff\xd8", frame
    finally:
        os.close(fd)


def frame_of(fd: int) -> list[str]:
    """ffmpeg as the attachments run it: the first frame of the descriptor's file, as JPEG."""
    argv = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-i", f"/proc/self/fd/{fd}"]
    return [*argv, "-frames:v", "1", "-f", "image2pipe", "-c:v", "mjpeg", "pipe:1"]


async def test_the_media_confinement_reads_its_input_but_not_the_daemons_state(
    service: SandboxService, outside: Path
) -> None:
    state_root = service.daemon.config.state_root
    (state_root / "kept.txt").write_text("the daemon's state\n")
    # A video the input names (an HLS playlist's segment), lying in the state root.
    segment = state_root / "segment.ts"
    green = ["-f", "lavfi", "-i", "color=c=green:s=64x48:r=10:d=1", "-c:v", "mpeg2video"]
    subprocess.run(
        [
            "ffmpeg",
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            *green,
            "-f",
            "mpegts",
            str(segment),
        ],
        check=True,
        timeout=60,
    )
    playlist = outside / "clip.m3u8"
    playlist.write_text(
        f"#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\n{segment}\n#EXT-X-ENDLIST\n"
    )
    video = outside / "clip.mp4"
    make_video(video)
    fds = [os.open(path, os.O_RDONLY) for path in (playlist, video)]
    listed, played = fds
    try:
        probe = (
            f"head -c 7 /proc/self/fd/{listed}; echo; cat {state_root}/kept.txt; ls {state_root}"
        )
        # The controls: under the linters' isolation (reads everywhere but the secret files) the
        # probe reads the state root, and the playlist's segment in it gives a frame.
        linters = await isolated(service)
        everywhere = await run_media(["bash", "-c", probe], linters, listed)
        assert everywhere.stdout.text().splitlines()[:2] == ["#EXTM3U", "the daemon's state"]
        named = await run_media(frame_of(listed), linters, listed)
        assert named.returncode == 0 and named.stdout.data[:2] == b"\xff\xd8", named
        media = await isolated(service, ISOLATED_INPUT_ONLY)
        confined = await run_media(["bash", "-c", probe], media, listed)
        assert confined.stdout.text().splitlines() == ["#EXTM3U"], confined
        assert confined.stderr.text().count("Permission denied") == 2, confined
        refused = await run_media(frame_of(listed), media, listed)
        assert refused.returncode != 0 and refused.stdout.data == b"", refused
        # It still decodes the video it was given.
        frame = await run_media(frame_of(played), media, played)
        assert frame.returncode == 0 and dominant(frame.stdout.data) == "red", frame
    finally:
        for fd in fds:
            os.close(fd)


# --- a sandboxed daemon -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandboxed(
    tmp_path_factory: pytest.TempPathFactory, scripted: tuple[ScriptedModel, str]
) -> Iterator[RunningDaemon]:
    # The linters' test is of the command-line linters (tools/lints.py), which a language
    # server would otherwise stand in for: the servers' own confinement is
    # tests/test_language_servers.py's.
    flags = ["--sandbox-enabled", "--no-language-servers"]
    with model_daemon_for_module(tmp_path_factory, scripted[1], *flags) as daemon:
        yield daemon


async def test_a_sandboxed_daemon_still_sees_the_frames_of_an_attached_video(
    sandboxed: RunningDaemon, scripted: tuple[ScriptedModel, str]
) -> None:
    model, _ = scripted
    video = sandboxed.workspace / "clip.mp4"
    make_video(video)
    model.turns = [Final("Red, then blue.")]
    call = task_call(
        "What does it show?",
        subagent_type=SubagentType.SUBAGENT_TYPE_MEDIA_REVIEW,
        attachments=[str(video)],
    )
    async with sandboxed.client() as client:
        result, _ = await run_task(client, call)
    assert result.success.final_message == "Red, then blue.", result
    frames = image_parts(model.chat_requests()[0]["messages"][1])
    assert len(frames) == 8 and all(mime == "image/jpeg" for mime, _ in frames)
    assert [dominant(data) for _, data in frames] == ["red"] * 4 + ["blue"] * 4


# A tsc the agent put in the workspace: it says, as a diagnostic, what it could do.
FAKE_TSC = """#!/bin/bash
if [ "$1" = --version ]; then echo "Version 5.0.0"; exit 0; fi
wrote=no; connected=no
touch {outside}/escaped 2>/dev/null && wrote=yes
(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && connected=yes
echo "${{@: -1}}(1,1): error TS1: wrote=$wrote connected=$connected"
exit 2
"""


async def test_a_sandboxed_daemons_linters_run_confined_and_still_lint(
    sandboxed: RunningDaemon, outside: Path, listener: int
) -> None:
    workspace = sandboxed.workspace
    (workspace / "main.ts").write_text("let label: number = 'a';\n")
    (workspace / "names.py").write_text("def f():\n    return undefined_name\n")
    tsc = workspace / "node_modules" / ".bin" / "tsc"
    tsc.parent.mkdir(parents=True)
    tsc.write_text(FAKE_TSC.format(outside=outside, port=listener))
    tsc.chmod(0o755)
    # The control: run by hand, it writes outside and connects.
    by_hand = subprocess.run([str(tsc), "x.ts"], capture_output=True, text=True, timeout=30)
    assert by_hand.stdout.strip() == "x.ts(1,1): error TS1: wrote=yes connected=yes"
    os.unlink(outside / "escaped")
    async with sandboxed.client() as client:
        result = await read_lints(client, "main.ts", "names.py")
        assert result.WhichOneof("result") == "success", result
        found = {d.message for f in result.success.files for d in f.diagnostics}
        assert "wrote=no connected=no" in found, found
        assert "Undefined name `undefined_name`" in found, "ruff lints, confined"
        assert os.listdir(outside) == []
        # The real tsc (the project's, as a TypeScript workspace has it) still type-checks.
        shutil.rmtree(workspace / "node_modules")
        (workspace / "node_modules").symlink_to(REPO / "node_modules", target_is_directory=True)
        real = await read_lints(client, "main.ts")
    assert [(d.code, d.message) for f in real.success.files for d in f.diagnostics] == [
        ("TS2322", "Type 'string' is not assignable to type 'number'.")
    ], real


async def test_the_isolated_decision_ignores_what_sandbox_json_opens(
    service: SandboxService, tmp_path: Path
) -> None:
    folder = tmp_path / "workspace" / ".cursor"
    folder.mkdir()
    opening = {"networkPolicy": {"default": "allow"}, "additionalReadwritePaths": ["/tmp"]}
    (folder / "sandbox.json").write_text(json.dumps(opening))
    # The control: a command of the agent's gets what sandbox.json opens.
    agents = await service.decide(None, SandboxDemand(confined=True))
    assert agents.effective_policy is not None and agents.effective_policy.network_access
    decision = await service.decide(None, ISOLATED)
    policy = decision.effective_policy
    assert policy is not None and not decision.refusal
    assert policy.type == SandboxPolicy.TYPE_WORKSPACE_READONLY
    assert not policy.network_access and policy.disable_tmp_write
    assert list(policy.additional_readwrite_paths) == []
    # Without --sandbox-enabled: unconfined, not refused (the limits of `bounded` still hold).
    off = sandbox_service(tmp_path / "workspace", enabled=False)
    try:
        unconfined = await off.decide(None, ISOLATED)
    finally:
        await off.aclose()
    assert unconfined.confinement is UNCONFINED and not unconfined.refusal
