"""ControlService ListArtifacts / UploadArtifacts / WarmRemoteAccessServer / DownloadCursorServer
(exec_daemon/rpc/artifacts.py, exec_daemon/rpc/remote_server.py) on the real daemon, against an
HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from agent.v1.control_pb2 import (
    DownloadCursorServerRequest,
    ListArtifactsRequest,
    UploadArtifactsRequest,
    WarmRemoteAccessServerRequest,
)
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.loopback_http import serving_http
from tests.test_sem_search_index import poll_search

DOWNLOAD = os.urandom(3 * 1024 * 1024 + 17)


@dataclass
class Received:
    size: int
    sha256: str
    content_type: str


@dataclass
class Server:
    url: str
    puts: dict[str, Received] = field(default_factory=dict)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:
        remaining = int(self.headers["content-length"])
        digest = hashlib.sha256()
        size = 0
        while remaining:
            chunk = self.rfile.read(min(remaining, 1 << 16))
            digest.update(chunk)
            size += len(chunk)
            remaining -= len(chunk)
        if "fail" in self.path:
            self._reply(500, b"no")
            return
        self.server.record.puts[self.path] = Received(
            size, digest.hexdigest(), self.headers.get("content-type", "")
        )
        self._reply(201)

    def do_GET(self) -> None:
        if self.path != "/builds/server.tar.gz":
            self._reply(404, b"not here")
            return
        self.send_response(200)
        self.send_header("content-length", str(len(DOWNLOAD)))
        self.end_headers()
        for start in range(0, len(DOWNLOAD), 100_000):
            self.wfile.write(DOWNLOAD[start : start + 100_000])


@pytest.fixture
def http_server() -> Iterator[Server]:
    with serving_http(Handler) as server:
        record = Server(f"http://127.0.0.1:{server.server_address[1]}")
        server.record = record  # type: ignore[attr-defined]
        yield record


def artifacts_folder(daemon: RunningDaemon) -> Path:
    return daemon.state_dir / "artifacts"


def put_artifacts(daemon: RunningDaemon, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = artifacts_folder(daemon) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


async def list_artifacts(client: ExecDaemonClient) -> dict[str, Any]:
    response = await client.control.list_artifacts(ListArtifactsRequest(), headers=client.headers)
    return {artifact.path: artifact for artifact in response.artifacts}


async def upload(client: ExecDaemonClient, url: str, *paths: str) -> Any:
    request = UploadArtifactsRequest(paths=list(paths), upload_url=url)
    return await client.control.upload_artifacts(request, headers=client.headers)


async def test_artifacts_are_listed_with_type_size_and_time(
    client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    assert await list_artifacts(client) == {}, "no folder yet: nothing, not an error"
    before_ms = int(time.time() * 1000) - 2000
    put_artifacts(
        daemon,
        {
            "screenshot.webp": b"RIFF0000WEBP",
            "recordings/run.mp4": b"\0" * 2048,
            "report.json": b"{}",
            ".report.json.123.tmp": b"half written",
        },
    )
    listed = await list_artifacts(client)
    assert sorted(listed) == ["recordings/run.mp4", "report.json", "screenshot.webp"]
    assert listed["screenshot.webp"].mime_type == "image/webp"
    assert listed["recordings/run.mp4"].mime_type == "video/mp4"
    assert listed["recordings/run.mp4"].size_bytes == 2048
    assert listed["report.json"].mime_type == "application/json"
    assert all(a.modified_ms >= before_ms and not a.uploaded for a in listed.values())


async def test_uploads_stream_each_file_and_mark_it_uploaded(
    client: ExecDaemonClient, daemon: RunningDaemon, http_server: Server
) -> None:
    big = os.urandom(5 * 1024 * 1024)
    put_artifacts(daemon, {"shot.png": b"\x89PNG" + b"x" * 100, "video/a b.mp4": big})
    response = await upload(client, http_server.url + "/upload/")
    assert sorted(a.path for a in response.uploaded) == ["shot.png", "video/a b.mp4"]
    assert list(response.failed) == []
    assert http_server.puts["/upload/video/a%20b.mp4"] == Received(
        len(big), hashlib.sha256(big).hexdigest(), "video/mp4"
    )
    assert http_server.puts["/upload/shot.png"].content_type == "image/png"
    listed = await list_artifacts(client)
    assert all(artifact.uploaded for artifact in listed.values())

    # Nothing left to upload; a changed file is no longer "uploaded".
    http_server.puts.clear()
    assert list((await upload(client, http_server.url)).uploaded) == []
    put_artifacts(daemon, {"shot.png": b"\x89PNG changed"})
    again = await upload(client, http_server.url + "/{path}?sig=abc")
    assert [a.path for a in again.uploaded] == ["shot.png"]
    assert list(http_server.puts) == ["/shot.png?sig=abc"]


async def test_failed_uploads_are_listed_with_their_reason(
    client: ExecDaemonClient, daemon: RunningDaemon, http_server: Server
) -> None:
    put_artifacts(daemon, {"ok.txt": b"fine", "fail.txt": b"refused"})
    in_workspace = daemon.workspace / "report.png"
    in_workspace.write_bytes(b"\x89PNG")
    response = await upload(
        client, http_server.url, "ok.txt", "fail.txt", "nope.txt", "../x", str(in_workspace)
    )
    assert [a.path for a in response.uploaded] == ["ok.txt"]
    reasons = {failure.path: failure.reason for failure in response.failures}
    where = (
        f"artifacts are the files under {artifacts_folder(daemon)} (--artifacts-folder), named "
        f"relative to it; workspace files are not artifacts"
    )
    assert reasons == {
        "fail.txt": "the server answered HTTP 500",
        "nope.txt": f"no such artifact: {where}",
        "../x": f"not inside the artifacts folder: {where}",
        str(in_workspace): f"not inside the artifacts folder: {where}",
    }
    assert sorted(response.failed) == sorted(reasons)
    listed = await list_artifacts(client)
    assert listed["ok.txt"].uploaded and not listed["fail.txt"].uploaded


async def test_an_unreachable_upload_server_fails_each_file(
    client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    put_artifacts(daemon, {"a.txt": b"a"})
    closed_port = free_port()  # nothing listens there
    response = await upload(client, f"http://127.0.0.1:{closed_port}")
    assert [failure.path for failure in response.failures] == ["a.txt"]
    assert response.failures[0].reason.startswith(
        f"cannot upload to 127.0.0.1:{closed_port}: ConnectError: "
    )
    assert "refused" in response.failures[0].reason.lower()


async def test_an_upload_without_a_url_is_refused(client: ExecDaemonClient) -> None:
    for url in ("", "ftp://example.com/x"):
        with pytest.raises(ConnectError) as refused:
            await upload(client, url)
        assert refused.value.code == Code.INVALID_ARGUMENT


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


async def test_a_large_upload_does_not_load_the_file_into_memory(
    client: ExecDaemonClient, daemon: RunningDaemon, http_server: Server
) -> None:
    size = 96 * 1024 * 1024
    path = artifacts_folder(daemon) / "large.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        file.truncate(size)  # sparse: cheap to make, still 96 MiB to read and send
    await list_artifacts(client)
    # The semantic index loads its model and indexes the workspace in the background at start:
    # done first, so that what is measured is the upload's.
    await poll_search(client, "upload", lambda result: result.success.index_complete)
    before = peak_rss_kib(daemon.process.pid)
    response = await upload(client, http_server.url)
    assert [a.path for a in response.uploaded] == ["large.bin"]
    assert http_server.puts["/large.bin"].size == size
    growth_mib = (peak_rss_kib(daemon.process.pid) - before) / 1024
    assert growth_mib < 32, f"the daemon's peak memory grew by {growth_mib:.0f} MiB"


async def test_the_remote_access_server_wants_a_version(client: ExecDaemonClient) -> None:
    with pytest.raises(ConnectError) as refused:
        await client.control.warm_remote_access_server(
            WarmRemoteAccessServerRequest(commit="abc"), headers=client.headers
        )
    assert refused.value.code == Code.INVALID_ARGUMENT
    assert "4.139.1" in str(refused.value)


async def test_the_cursor_server_is_downloaded_from_the_url_given(
    workspace: Path, tmp_path: Path, http_server: Server
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with running_daemon(workspace, tmp_path / "state", env={"HOME": str(home)}) as running:
        async with running.client() as client:

            async def download(**fields: str) -> Any:
                request = DownloadCursorServerRequest(**fields)
                return await client.control.download_cursor_server(request, headers=client.headers)

            done = await download(commit="0123abc", url=http_server.url + "/builds/server.tar.gz")
            with pytest.raises(ConnectError) as no_url:
                await download(commit="0123abc")
            with pytest.raises(ConnectError) as missing:
                await download(commit="def", url=http_server.url + "/builds/none.tar.gz")
            with pytest.raises(ConnectError) as bad_commit:
                await download(commit="../../etc", url=http_server.url + "/builds/server.tar.gz")
    target = home / ".cursor-server" / "downloads" / "cursor-server-0123abc"
    assert done.path == str(target)
    assert target.read_bytes() == DOWNLOAD
    assert (done.size_bytes, done.sha256) == (len(DOWNLOAD), hashlib.sha256(DOWNLOAD).hexdigest())
    # Without a url the commit is a code-server version (tests/test_remote_access.py): not one.
    assert no_url.value.code == Code.INVALID_ARGUMENT
    assert missing.value.code == Code.UNAVAILABLE and "HTTP 404" in str(missing.value)
    assert bad_commit.value.code == Code.INVALID_ARGUMENT
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name], "no partial files"


async def test_a_failed_download_says_which_host_and_why(workspace: Path, tmp_path: Path) -> None:
    closed_port = free_port()  # nothing listens there
    home = tmp_path / "home"
    home.mkdir()
    with running_daemon(workspace, tmp_path / "state", env={"HOME": str(home)}) as running:
        async with running.client() as client:
            with pytest.raises(ConnectError) as refused:
                await client.control.download_cursor_server(
                    DownloadCursorServerRequest(
                        commit="abc", url=f"http://127.0.0.1:{closed_port}/s.tgz?sig=SECRET"
                    ),
                    headers=client.headers,
                )
    assert refused.value.code == Code.UNAVAILABLE
    message = refused.value.message
    assert message.startswith(f"cannot download from 127.0.0.1:{closed_port}: ConnectError: ")
    assert "refused" in message.lower()
    assert "SECRET" not in message


async def test_links_out_of_the_artifacts_folder_are_not_uploaded(
    client: ExecDaemonClient, daemon: RunningDaemon, http_server: Server
) -> None:
    secret = daemon.state_dir / "not-an-artifact"
    secret.write_text("daemon-only")
    outside = daemon.state_dir / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "inner.txt").write_text("daemon-only")
    folder = artifacts_folder(daemon)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "link.txt").symlink_to(secret)
    (folder / "linked-folder").symlink_to(outside)
    http_server.puts.clear()
    response = await upload(client, http_server.url, "link.txt", "linked-folder/inner.txt")
    reasons = {failure.path: failure.reason for failure in response.failures}
    assert reasons == {
        "link.txt": "a symbolic link: artifacts are regular files",
        "linked-folder/inner.txt": "its folder is a symbolic link out of the artifacts folder",
    }
    assert list(response.uploaded) == [] and http_server.puts == {}
