"""Node @connectrpc/connect-node (npm, installed at the repo root by scripts/setup) against the
real daemon, with no codegen: tests/node/connect_client.mjs builds its service descriptors at
run time from the FileDescriptorSet scripts/gen-protos writes (proto/agent/v1/descriptors.binpb)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import RunningDaemon
from tests.interop import assert_still_serving, daemon_for_module

REPO = Path(__file__).resolve().parent.parent
CLIENT = REPO / "tests" / "node" / "connect_client.mjs"
# HTTP/1.1 clients that are refused while still writing their body are where EPIPE/ECONNRESET
# would show up instead of `unauthenticated` (design.md); one try proves nothing.
WRONG_TOKEN_CALLS = 200


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        yield running


@pytest.fixture(scope="module")
def descriptor_set() -> Path:
    assert (REPO / "node_modules" / "@connectrpc" / "connect-node").is_dir(), (
        "npm packages missing: run ./scripts/setup (npm install at the repo root)"
    )
    return REPO / "proto" / "agent" / "v1" / "descriptors.binpb"


def node_client(
    daemon: RunningDaemon, descriptor_set: Path, scenario: str, **options: object
) -> Any:
    ran = subprocess.run(
        [
            "node", str(CLIENT), scenario, daemon.url, daemon.token, str(descriptor_set),
            json.dumps(options),
        ],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_ping_and_exec_stream_over_http2(daemon: RunningDaemon, descriptor_set: Path) -> None:
    answers = node_client(daemon, descriptor_set, "smoke", httpVersion="2")
    assert answers["ping"]["version"]
    assert answers["ping"]["pid"] == daemon.process.pid
    assert answers["stream"] == [
        {"id": 7, "toolCallResult": {"readTodosToolCall": {"args": {}, "result": {"success": {}}}}}
    ]


@pytest.mark.parametrize("protocol", ["connect", "grpcweb"])
async def test_wrong_token_over_http1_is_always_a_clean_unauthenticated(
    daemon: RunningDaemon, descriptor_set: Path, protocol: str
) -> None:
    outcome = node_client(
        daemon, descriptor_set, "wrong-token",
        httpVersion="1.1", protocol=protocol, calls=WRONG_TOKEN_CALLS,
    )  # fmt: skip
    assert outcome == {"codes": {"Unauthenticated": WRONG_TOKEN_CALLS}, "failures": []}
    await assert_still_serving(daemon)
