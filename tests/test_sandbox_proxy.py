"""sandbox/proxy.py: the network allowlist, end to end through real curl in the real sandbox.

Targets are loopback servers only; the daemon's operator switch that lets the proxy reach
loopback (EXEC_DAEMON_SANDBOX_PROXY_ALLOW_PRIVATE) is set for these tests.
"""

from __future__ import annotations

import http.server
import ipaddress
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agent.v1.shell_pb2 import SandboxPolicy
from sandbox.policy import HostPattern, NetworkPolicy
from sandbox.proxy import ALLOW_PRIVATE_ENV, ProxyRules, Refused
from tests.daemon_process import running_daemon
from tests.loopback_http import serving_http
from tests.sandbox_harness import (
    Identity,
    SandboxHarness,
    identities,
    owned_directory,
    remove_tree,
    sandbox_service,
)
from tests.test_shared_terminals import agent_shell

pytestmark = pytest.mark.timeout(60)
RW = SandboxPolicy.TYPE_WORKSPACE_READWRITE
RW_POLICY = SandboxPolicy(type=RW)
NONE_POLICY = SandboxPolicy(type=SandboxPolicy.TYPE_INSECURE_NONE)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[int]:
    with serving_http(_Handler) as server:
        yield server.server_address[1]


@pytest.fixture(params=identities(), ids=lambda identity: identity.name)
def identity(request: pytest.FixtureRequest) -> Identity:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def harness(
    identity: Identity, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SandboxHarness]:
    monkeypatch.setenv(ALLOW_PRIVATE_ENV, "127.0.0.0/8")
    workspace = owned_directory(identity, "sbx-proxy-")
    service = sandbox_service(workspace)
    yield SandboxHarness(workspace, identity, service)
    await service.aclose()
    remove_tree(workspace)


def policy(allow: list[str], deny: list[str] = (), network_access: bool = False) -> SandboxPolicy:  # type: ignore[assignment]
    return SandboxPolicy(
        type=RW, network_allow=allow, network_deny=list(deny), network_access=network_access
    )


def curl(url: str, *flags: str) -> str:
    return f"curl -sS -m 10 -w ' code=%{{http_code}}\\n' {' '.join(flags)} {url} 2>&1; true"


async def test_allowlisted_host_is_reached_through_the_proxy_others_are_refused(
    harness: SandboxHarness, web_server: int
) -> None:
    base = f"localhost:{web_server}"
    script = "\n".join(
        [
            'echo "proxy=$HTTPS_PROXY $http_proxy no_proxy=${NO_PROXY-unset}"',
            curl(f"http://{base}/plain"),
            curl(f"http://{base}/tunnel", "--proxytunnel"),
            curl(f"http://127.0.0.1:{web_server}/by-address"),
            curl(f"http://127.0.0.1:{web_server}/direct", "--noproxy '*'"),
        ]
    )
    result = await harness.run(script, policy(["localhost"]))
    lines = result.stdout.splitlines()
    assert lines[0] == "proxy=http://127.0.0.1:3128 http://127.0.0.1:3128 no_proxy=unset"
    assert lines[1] == "hello /plain" and lines[2] == " code=200"
    assert lines[3] == "hello /tunnel" and lines[4] == " code=200"
    assert "not in the sandbox network allowlist" in lines[5] and "code=403" in result.stdout
    # Going around the proxy finds nothing: the sandbox has its own network namespace.
    assert "hello /direct" not in result.stdout
    assert lines[-1] == " code=000"


async def test_deny_wins_over_allow(harness: SandboxHarness, web_server: int) -> None:
    result = await harness.run(
        "\n".join(
            [curl(f"http://127.0.0.1:{web_server}/one"), curl(f"http://127.0.0.2:{web_server}/two")]
        ),
        policy(["127.0.0.0/8"], deny=["127.0.0.2"]),
    )
    assert "hello /one" in result.stdout
    assert "127.0.0.2 is denied by the sandbox network policy" in result.stdout
    for deny in (["localhost"], ["127.0.0.1/32"]):
        result = await harness.run(
            curl(f"http://localhost:{web_server}/x"), policy(["localhost"], deny)
        )
        assert (
            "is denied by the sandbox network policy" in result.stdout
            and "code=403" in result.stdout
        )


async def test_default_allow_with_deny_entries_goes_through_the_proxy(
    harness: SandboxHarness, web_server: int
) -> None:
    result = await harness.run(
        "\n".join(
            [
                curl(f"http://localhost:{web_server}/ok"),
                curl(f"http://127.0.0.3:{web_server}/denied"),
                "echo > /dev/udp/127.0.0.1/53 2>/dev/null && echo UDP-SENT; true",
            ]
        ),
        policy([], deny=["127.0.0.3"], network_access=True),
    )
    assert "hello /ok" in result.stdout and "127.0.0.3 is denied" in result.stdout
    assert "UDP-SENT" not in result.stdout


async def test_private_addresses_are_refused_unless_the_operator_allows_them(
    monkeypatch: pytest.MonkeyPatch, web_server: int, tmp_path: Path
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV, raising=False)
    identity = identities()[0]
    workspace = owned_directory(identity, "sbx-proxy-")
    service = sandbox_service(workspace)
    try:
        harness = SandboxHarness(workspace, identity, service)
        result = await harness.run(curl(f"http://localhost:{web_server}/x"), policy(["localhost"]))
        assert "private, local or metadata address" in result.stdout and "code=403" in result.stdout
    finally:
        await service.aclose()
        remove_tree(workspace)


def rules(
    allow: list[str], deny: list[str] = (), *, default_allow: bool = False, private: bool = True
) -> ProxyRules:  # type: ignore[assignment]
    network = NetworkPolicy(
        default_allow=default_allow,
        allow=tuple(HostPattern.parse(entry) for entry in allow),
        deny=tuple(HostPattern.parse(entry) for entry in deny),
    )
    exceptions = (ipaddress.ip_network("127.0.0.0/8"),) if private else ()
    return ProxyRules(network, exceptions)


async def test_rules_refuse_metadata_and_private_addresses_and_match_wildcards() -> None:
    open_rules = rules([], default_allow=True, private=False)
    for address in (
        "169.254.169.254",
        "10.0.0.1",
        "192.168.1.1",
        "127.0.0.1",
        "::1",
        "::ffff:127.0.0.1",
        "fd00:ec2::254",
        "100.64.0.1",
        "224.0.0.1",
    ):
        with pytest.raises(Refused, match="private, local or metadata"):
            await open_rules.addresses_for(address, 80)
    assert await open_rules.addresses_for("93.184.215.14", 443) == [
        ipaddress.ip_address("93.184.215.14")
    ]
    wildcard = rules(["*.localhost"])
    with pytest.raises(Refused, match="not in the sandbox network allowlist"):
        await wildcard.addresses_for("127.0.0.1", 80)
    with pytest.raises(Refused, match="denied"):
        await rules(["localhost"], ["*.example.com", "localhost"]).addresses_for("LocalHost.", 80)


async def test_an_explicit_loopback_port_is_reachable_the_daemons_own_ports_never() -> None:
    own = {8080: "RPC", 8081: "PTY WebSocket"}
    listed = ProxyRules(
        NetworkPolicy(
            allow=tuple(HostPattern.parse(e) for e in ("127.0.0.1:3000", "localhost:3001"))
        ),
        own_ports=own,
    )
    assert await listed.addresses_for("127.0.0.1", 3000) == [ipaddress.ip_address("127.0.0.1")]
    assert ipaddress.ip_address("127.0.0.1") in await listed.addresses_for("localhost", 3001)
    with pytest.raises(Refused, match="private, local or metadata"):
        await listed.addresses_for("127.0.0.1", 3001)  # another port of the same address
    with pytest.raises(Refused, match="private, local or metadata"):
        await listed.addresses_for("127.0.0.2", 3000)
    for entry, host, port in (
        ("127.0.0.1:8080", "127.0.0.1", 8080),
        ("localhost:8081", "localhost", 8081),
    ):
        named = ProxyRules(NetworkPolicy(allow=(HostPattern.parse(entry),)), own_ports=own)
        with pytest.raises(Refused, match=f"exec daemon's own {own[port]} port"):
            await named.addresses_for(host, port)
    # Whatever else lets loopback through (the operator's exception), never the daemon's ports.
    opened = ProxyRules(
        NetworkPolicy(default_allow=True), (ipaddress.ip_network("127.0.0.0/8"),), own
    )
    with pytest.raises(Refused, match="own RPC port"):
        await opened.addresses_for("127.0.0.5", 8080)


async def test_a_sandboxed_daemon_opens_a_listed_loopback_port_and_never_its_own(
    tmp_path: Path, web_server: int
) -> None:
    """Through the real daemon, without the operator's private-network exception: the project's
    sandbox.json lists `127.0.0.1:PORT` and a sandboxed command reaches that server, only then."""
    workspace = tmp_path / "workspace"
    (workspace / ".cursor").mkdir(parents=True)
    config = workspace / ".cursor" / "sandbox.json"
    with running_daemon(workspace, tmp_path / "state", "--sandbox-enabled") as daemon:

        async def sandboxed_curl(url: str, allow: list[str]) -> str:
            config.write_text(json.dumps({"networkPolicy": {"allow": allow}}))
            return await agent_shell(daemon, curl(url), requested_sandbox_policy=RW_POLICY)

        page = f"http://127.0.0.1:{web_server}/dev-server"
        assert "hello /dev-server" not in await sandboxed_curl(page, [])
        assert "hello /dev-server" in await sandboxed_curl(page, [f"127.0.0.1:{web_server}"])
        # Another loopback port listed does not open this one.
        other = await sandboxed_curl(page, [f"127.0.0.1:{web_server + 1}"])
        assert "hello /dev-server" not in other and "code=403" in other
        for port, what in ((daemon.port, "RPC"), (daemon.pty_port, "PTY WebSocket")):
            own = f"http://127.0.0.1:{port}/"
            refused = await sandboxed_curl(own, [f"127.0.0.1:{port}"])
            assert f"is the exec daemon's own {what} port" in refused and "code=403" in refused
            # Unconfined, the same port answers: it was the sandbox that refused.
            answered = await agent_shell(daemon, curl(own), requested_sandbox_policy=NONE_POLICY)
            assert "code=000" not in answered and "own" not in answered
