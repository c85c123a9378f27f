"""`exec-daemon serve` and friends."""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import re
import secrets
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from exec_daemon import __version__
from exec_daemon.kernel.addresses import parse_networks
from exec_daemon.kernel.config import (
    DEFAULT_BROWSER_SESSION_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_HEARTBEAT_SECONDS,
    DEFAULT_IDE_FOLDER,
    DEFAULT_IDE_PORT,
    DEFAULT_IMAGE_MODEL,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PORT,
    DEFAULT_PTY_WEBSOCKET_PORT,
    DEFAULT_QUESTION_TIMEOUT_SECONDS,
    DEFAULT_SUBAGENT_MAX_STEPS,
    DEFAULT_SUBAGENT_MAX_TOKENS,
    RUN_MODES,
    DaemonConfig,
    default_build_cache_folder,
)
from exec_daemon.kernel.processes import make_undumpable, run_as_init_if_pid1
from exec_daemon.kernel.secrets import (
    AUTH_TOKEN_VARIABLE,
    MODEL_API_KEY_VARIABLE,
    TRACE_TOKEN_VARIABLE,
    keep_secret,
)
from exec_daemon.rpc.cors import parse_origin
from exec_daemon.telemetry.logs import LOG_FORMATS, formatter

log = logging.getLogger("exec_daemon")

# Accepted (the orchestrator passes them) and ignored: the seed deprecates them.
DEPRECATED = {"cursor_self_control_enabled": "use computer_use (CUA-based testing)"}
# Acted on by the VM image's init (scripts/image/desktop-init starts the browser), not the daemon.
FOR_THE_IMAGE = ("browser_enabled", "chrome_executable_path")


def resolve_rg_path(rg_path: str) -> str:
    """`rg` from PATH, else the one installed beside this Python (PyPI `ripgrep`)."""
    found = shutil.which(rg_path)
    if found:
        return found
    beside = Path(sys.executable).parent / "rg"
    return str(beside) if rg_path == "rg" and beside.exists() else rg_path


def read_token_file(path: Path) -> str:
    """The token in `path` (stripped); refuses a file group or others may access."""
    try:
        with path.open("rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if mode & 0o077:
                raise click.UsageError(
                    f"--auth-token-file {path} may be read by others (mode {mode & 0o777:04o}); "
                    f"chmod 600 it"
                )
            token = file.read().decode("utf-8", "replace").strip()
    except OSError as exc:
        raise click.UsageError(f"--auth-token-file {path}: {exc.strerror}") from None
    if not token:
        raise click.UsageError(f"--auth-token-file {path} is empty")
    return token


def forget_variable(name: str) -> str | None:
    """Removes `name` from the environment, and its value from the process' initial environment
    block too, which /proc/<pid>/environ shows (unsetenv only drops the pointer to it)."""
    prefix = f"{name}=".encode()
    try:
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")
        index = 0
        while address := environ[index]:
            entry = ctypes.string_at(address)
            if entry.startswith(prefix):
                ctypes.memset(address + len(prefix), 0, len(entry) - len(prefix))
            index += 1
    except (OSError, ValueError):
        log.warning("cannot clear %s from the initial environment block", name)
    return os.environ.pop(name, None)


def auth_token_from(argv_token: str | None, token_file: Path | None) -> str:
    """The token from --auth-token, --auth-token-file or the environment (then removed from it)."""
    from_env = forget_variable(AUTH_TOKEN_VARIABLE) or None
    given = [
        name
        for name, value in (("--auth-token", argv_token), ("--auth-token-file", token_file))
        if value
    ]
    if len(given) > 1:
        raise click.UsageError("give --auth-token or --auth-token-file, not both")
    if token_file is not None:
        return read_token_file(token_file)
    if argv_token:
        log.warning(
            "--auth-token is visible to every process of the machine (/proc/*/cmdline): "
            "use --auth-token-file or %s",
            AUTH_TOKEN_VARIABLE,
        )
        return argv_token
    if from_env:
        return from_env
    raise click.UsageError(
        f"no auth token: give --auth-token-file PATH, set {AUTH_TOKEN_VARIABLE} or --auth-token"
    )


def networks_option(value: str) -> tuple[str, ...]:
    """--fetch-allow-private's networks, each checked (a bad one is a usage error)."""
    parts = tuple(part.strip() for part in value.split(",") if part.strip())
    try:
        parse_networks(parts)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return parts


def origins_option(values: tuple[str, ...]) -> tuple[str, ...]:
    """--cors-allowed-origins: repeated and/or comma-separated, each an exact origin."""
    parts = [part for value in values for part in value.split(",") if part.strip()]
    try:
        return tuple(dict.fromkeys(parse_origin(part) for part in parts))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def auth_header_option(value: str | None) -> str | None:
    """--auth-header: an HTTP header name (RFC 9110 token), not one the daemon reads already."""
    if value is None:
        return None
    name = value.strip().lower()
    if not re.fullmatch(r"[a-z0-9!#$%&'*+.^_`|~-]+", name) or name.startswith(":"):
        raise click.BadParameter(f"{value!r} is not an HTTP header name")
    if name in ("authorization", "host", "content-type", "te", "cookie"):
        raise click.BadParameter(f"{name} is a header the daemon or HTTP already uses")
    return name


def url_option(value: str | None) -> str | None:
    """An endpoint flag's URL: http(s) with a host, else a usage error."""
    if value is None:
        return None
    scheme, _, rest = value.partition("://")
    if scheme not in ("http", "https") or not rest.split("/")[0]:
        raise click.BadParameter(f"{value!r} is not an http:// or https:// URL")
    return value


def mcp_config_option(value: str | None) -> str | None:
    """--mcp-config's JSON: the text itself, or read now from the file it names, so that what the
    agent may later write there changes nothing (the servers it names run commands)."""
    if value is None or value.lstrip().startswith("{"):
        return value
    try:
        return Path(value).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise click.BadParameter(
            f"neither JSON text (it would start with '{{') nor a readable file: {value}: {why}"
        ) from None


def fixed_mmap_threshold(size: int = 1 << 20, trim: int = 16 << 20) -> None:
    """Keeps glibc's mmap threshold at `size` instead of letting it adapt, and its trim
    threshold at `trim`.

    Adapting, the mmap threshold climbs (up to 32 MiB) after the first large free, and streamed
    output's short-lived buffers then fragment the heap: one 100 MB output left the daemon
    30-90 MB larger. Fixed at 1 MiB it grows by ~7-25 MB and stays there; fixed lower (128 KiB),
    every buffer is a fresh mmap and page faults double the daemon's CPU per streamed byte.
    Fixing it also leaves the trim threshold at its 128 KiB default, so the heap's top was given
    back to the kernel after every 512 KiB output delta and faulted in again for the next:
    ~7,000-9,000 page faults per 10 MB streamed. At 16 MiB that is ~400, the daemon's system
    time per 10 MB falls by a third and its peak RSS does not move.
    """
    m_trim_threshold, m_mmap_threshold = -1, -3
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(m_mmap_threshold, size)
        libc.mallopt(m_trim_threshold, trim)
    except (OSError, AttributeError):
        pass  # not glibc


def setup_logging(level: str, log_format: str = "text") -> None:
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(formatter(log_format))
    logging.basicConfig(level=level.upper(), handlers=[console])
    # Their debug output is per frame and per header: noise even when debugging the daemon.
    for chatty in ("hpack", "h2", "h11"):
        logging.getLogger(chatty).setLevel(max(logging.INFO, logging.getLogger().level))


def workspace_folder(workspace: Path | None) -> Path:
    """The workspace the daemon serves, resolved: a folder it can list and enter, else the
    start ends with one line saying why."""
    try:
        folder = (workspace or Path.cwd()).resolve()
    except OSError as exc:  # the current directory was removed
        raise click.ClickException(f"--workspace: the current directory: {exc.strerror}") from None
    if not folder.is_dir():
        missing = "is not a folder" if folder.exists() else "does not exist"
        raise click.ClickException(f"--workspace {workspace or folder} {missing}")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise click.ClickException(f"--workspace {folder} cannot be read by this user")
    return folder


def with_scheme(url: str) -> str:
    """`url`, with http:// in front when it names no scheme (`127.0.0.1:8080`)."""
    return url if "://" in url else f"http://{url}"


def _host_port(value: str) -> str:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT")
    return value


@click.group()
@click.version_option(__version__, prog_name="exec-daemon")
def main() -> None:
    """The exec daemon: runs an AI coding agent's tools inside its VM."""


@main.command()
@click.option(
    "-p",
    "--port",
    type=int,
    default=DEFAULT_PORT,
    show_default=True,
    help="HTTP server port (Connect, gRPC, gRPC-Web).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (loopback by default; 0.0.0.0 for every interface).",
)
@click.option(
    "--pty-websocket-port",
    type=int,
    default=DEFAULT_PTY_WEBSOCKET_PORT,
    show_default=True,
    help="PTY WebSocket port.",
)
@click.option(
    "--auth-token",
    default=None,
    help="Bearer token every request must carry. Visible to every process on the machine: "
    "prefer --auth-token-file or EXEC_DAEMON_AUTH_TOKEN (removed from the daemon's environment).",
)
@click.option(
    "--auth-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File holding the bearer token (mode 0600: refused when group or others may read it).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warn", "error"]),
    default="info",
    show_default=True,
    help="The least severe log lines written (to stderr).",
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="text",
    show_default=True,
    help="stderr's log lines: text, or json (one object per line, with the trace and span ids "
    "of the tool call that logged it when telemetry is on).",
)
@click.option(
    "--workspace",
    type=click.Path(path_type=Path),
    default=None,
    help="The workspace root (default: the current directory).",
)
@click.option("--rg-path", default="rg", show_default=True, help="Path to ripgrep.")
@click.option(
    "--max-message-bytes",
    type=int,
    default=DEFAULT_MAX_MESSAGE_BYTES,
    show_default=True,
    help="Largest request message accepted.",
)
@click.option(
    "--heartbeat-seconds",
    type=float,
    default=DEFAULT_HEARTBEAT_SECONDS,
    show_default=True,
    help="ExecStream heartbeat interval.",
)
@click.option(
    "--compress-responses",
    is_flag=True,
    help="Compress responses when the client accepts it (off: it costs more CPU than it saves).",
)
@click.option("--browser-enabled", is_flag=True, help="Enable browser automation.")
@click.option(
    "--cursor-self-control-enabled", is_flag=True, help="Deprecated: use CUA-based testing."
)
@click.option(
    "--mcp-config",
    default=None,
    callback=lambda _ctx, _param, value: mcp_config_option(value),
    metavar="JSON|PATH",
    help="MCP servers in mcp.json's shape: the JSON text itself (starting with '{'), or the path "
    "of a file holding it, read once at start (comments allowed).",
)
@click.option("--mcp-oauth-server-urls", default=None, help="MCP servers using OAuth (JSON).")
@click.option("--http-mcp-tools-file", default=None, help="HTTP MCP tool definitions file.")
@click.option(
    "--cloud-rules-enabled",
    is_flag=True,
    help="Enable cloud rules: GetAgentContext also reads .cursor/cloud-rules/ (workspace and home).",
)
@click.option("--computer-use-enabled", is_flag=True, help="Enable computer use.")
@click.option(
    "--secret-redaction-enabled", is_flag=True, help="Redact injected secrets from tool output."
)
@click.option(
    "--run-mode",
    type=click.Choice(RUN_MODES),
    default="run_everything",
    show_default=True,
    help="Which shell/MCP/fetch calls run without approval (a call may ask for another mode).",
)
@click.option("--chrome-executable-path", default=None, help="Custom Chrome path.")
@click.option("--record-screen-enabled", is_flag=True, help="Enable screen recording.")
@click.option(
    "--screenshot-delay-ms",
    type=click.IntRange(min=0),
    default=2000,
    show_default=True,
    help="Computer use: wait this long before each screenshot (the UI settles).",
)
@click.option("--generate-image-enabled", is_flag=True, help="Enable AI image generation.")
@click.option("--sandbox-enabled", is_flag=True, help="Enable sandbox enforcement.")
@click.option("--sandbox-helper-path", default=None, help="Path to the sandbox helper.")
@click.option(
    "--claude-md-enabled/--no-claude-md-enabled",
    default=True,
    show_default=True,
    help="Also serve Claude Code's memory files (CLAUDE.md, .claude/CLAUDE.md, CLAUDE.local.md, "
    "~/.claude/CLAUDE.md, .claude/rules/) in GetAgentContext; AGENTS.md is always served.",
)
@click.option(
    "--trace-endpoint",
    default=None,
    help="OTLP endpoint of traces, metrics and logs (gRPC unless OTEL_EXPORTER_OTLP_PROTOCOL says).",
)
@click.option(
    "--trace-auth-token",
    envvar=TRACE_TOKEN_VARIABLE,
    default=None,
    help=f"Trace authentication token (or {TRACE_TOKEN_VARIABLE}).",
)
@click.option(
    "--ghost-mode",
    type=bool,
    default=True,
    show_default=True,
    help="Privacy mode: no telemetry is sent (traces, metrics, logs).",
)
@click.option(
    "--trace-insecure",
    is_flag=True,
    help="OTLP/gRPC (the default): plaintext instead of TLS. OTLP/HTTP "
    "(OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf) to https://: TLS without checking the certificate.",
)
@click.option(
    "--fetch-allow-private",
    default="",
    callback=lambda _ctx, _param, value: networks_option(value),
    metavar="CIDRS",
    help="Comma-separated networks (e.g. 127.0.0.0/8,10.1.0.0/16) the fetch and web_fetch tools "
    "may reach although loopback, private or link-local; by default they reach public addresses "
    "only. The daemon's own ports stay refused.",
)
@click.option(
    "--terminals-folder",
    type=click.Path(path_type=Path),
    default=None,
    show_default="<state root>/terminals",
    help="The daemon's own folder: terminal output files, state (read-only in sandboxes; where it "
    "lies in a folder sandboxes may write, its folders up to that one are pinned there). By "
    "default in the daemon's private state root (SECURITY.md).",
)
@click.option(
    "--artifacts-folder",
    type=click.Path(path_type=Path),
    default=Path("/opt/cursor/artifacts"),
    show_default=True,
    help="Where the agent's artifacts (screenshots, recordings) are kept for UploadArtifacts.",
)
@click.option(
    "--cors-allowed-origins",
    multiple=True,
    callback=lambda _ctx, _param, value: origins_option(value),
    metavar="ORIGINS",
    help="Origins (e.g. https://app.example.com,http://localhost:5173; repeatable) whose web "
    "pages may call the RPC port from a browser (CORS; the calls still need the token). "
    "None by default.",
)
@click.option(
    "--sandbox-build-cache-folder",
    # Not checked here: the daemon makes it, or turns the caches off saying why (sandbox/caches.py).
    type=click.Path(path_type=Path, readable=False),
    default=default_build_cache_folder,
    show_default="/tmp/exec-daemon-build-caches-<uid>",
    help="Where sandboxed commands keep the caches of npm, pip, uv, cargo, go and gradle (shared "
    "by every sandboxed command; unconfined ones keep their own unless sandbox.json sets "
    "enableSharedBuildCache).",
)
@click.option(
    "--model-endpoint",
    default=None,
    metavar="URL",
    callback=lambda _ctx, _param, value: url_option(value),
    help="OpenAI-compatible API base URL (e.g. https://api.openai.com/v1) for the model-backed "
    "tools: Task subagents, generate_image, the grind tools.",
)
@click.option(
    "--model-api-key",
    envvar=MODEL_API_KEY_VARIABLE,
    default=None,
    help=f"The model endpoint's API key (or {MODEL_API_KEY_VARIABLE}); never given to the "
    "agent's processes, redacted from what the daemon sends.",
)
@click.option("--model", default=None, help="The model subagents run on.")
@click.option("--fast-model", default=None, help='The model of Tasks asking for model "fast".')
@click.option(
    "--image-model",
    default=DEFAULT_IMAGE_MODEL,
    show_default=True,
    help="The images API model generate_image asks for (with --generate-image-enabled).",
)
@click.option(
    "--web-search-endpoint",
    default=None,
    metavar="URL",
    callback=lambda _ctx, _param, value: url_option(value),
    help="A SearXNG-compatible search API base URL (GET /search?format=json) for web_search.",
)
@click.option(
    "--subagent-max-steps",
    type=click.IntRange(min=1),
    default=DEFAULT_SUBAGENT_MAX_STEPS,
    show_default=True,
    help="Model turns a Task's subagent may take before it is stopped.",
)
@click.option(
    "--subagent-max-tokens",
    type=click.IntRange(min=1),
    default=DEFAULT_SUBAGENT_MAX_TOKENS,
    show_default=True,
    help="Tokens (prompt and completion, summed over its turns) a Task's subagent may use.",
)
@click.option(
    "--question-timeout-seconds",
    type=click.FloatRange(min=1),
    default=DEFAULT_QUESTION_TIMEOUT_SECONDS,
    show_default=True,
    help="How long ask_question waits for an AnswerQuestion.",
)
@click.option(
    "--ide-port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_IDE_PORT,
    show_default=True,
    help="Port of the browser IDE (code-server behind the daemon's token), started by "
    "WarmRemoteAccessServer; 0: off.",
)
@click.option(
    "--ide-folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_IDE_FOLDER,
    show_default=True,
    help="Where code-server is installed (DownloadCursorServer with a version) and keeps its state.",
)
@click.option(
    "--novnc-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port of the desktop page (noVNC behind the token; the image uses 26058); 0: none.",
)
@click.option(
    "--vnc-address",
    default="127.0.0.1:5901",
    callback=lambda _ctx, _param, value: _host_port(value),
    show_default=True,
    help="HOST:PORT of the VNC server the desktop page shows.",
)
@click.option(
    "--wait-for-init",
    is_flag=True,
    help="Warm pool: the token given (--auth-token-file, ...) is the pool's credential; only "
    "health and ControlService.InitSandbox are answered until InitSandbox binds the daemon to "
    "its agent (token, environment, workspace, user), once. Workspace watchers, shells and "
    "terminals start then; the pool's --auth-token-file is removed then (when it may be).",
)
@click.option(
    "--drain-grace-seconds",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="On SIGTERM readiness (/readyz, grpc.health.v1) turns 503 at once and new calls are "
    "refused; calls in flight get this long to finish before they are cancelled.",
)
@click.option(
    "--auth-header",
    default=None,
    callback=lambda _ctx, _param, value: auth_header_option(value),
    metavar="NAME",
    help="A second request header that may carry the token (the token alone, or 'Bearer "
    "<token>'), for routers that strip Authorization (agent-sandbox's sandbox-router).",
)
@click.option(
    "--header-timeout-seconds",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_HEADER_TIMEOUT_SECONDS,
    show_default=True,
    help="A connection to --port that has not sent a whole request within this long (it "
    "connected and said nothing, or stalled mid-head) is closed. Once it has, it stays open "
    "while idle for 600 s.",
)
@click.option(
    "--browser-session-seconds",
    type=click.FloatRange(min=1),
    default=DEFAULT_BROWSER_SESSION_SECONDS,
    show_default=True,
    help="How long a browser signed in to the desktop page or the IDE stays signed in without "
    "a request (each request in a session's second half renews it).",
)
def serve(
    workspace: Path | None,
    log_level: str,
    log_format: str,
    rg_path: str,
    auth_token: str | None,
    auth_token_file: Path | None,
    **options: Any,
) -> None:
    """Serve the ControlService and ExecService on one port."""
    setup_logging("warning" if log_level == "warn" else log_level, log_format)
    # Before anything else reads it: no child, and no agent process through /proc, gets it.
    make_undumpable()
    token = auth_token_from(auth_token, auth_token_file)
    forget_variable(TRACE_TOKEN_VARIABLE)
    forget_variable(MODEL_API_KEY_VARIABLE)
    trace_source = click.get_current_context().get_parameter_source("trace_auth_token")
    if trace_source == click.core.ParameterSource.COMMANDLINE:
        log.warning(
            "--trace-auth-token is visible to every process of the machine: use %s",
            TRACE_TOKEN_VARIABLE,
        )
    if (
        click.get_current_context().get_parameter_source("model_api_key")
        == click.core.ParameterSource.COMMANDLINE
    ):
        log.warning(
            "--model-api-key is visible to every process of the machine: use %s",
            MODEL_API_KEY_VARIABLE,
        )
    for value in (token, options.get("trace_auth_token"), options.get("model_api_key")):
        keep_secret(value)
    for name, instead in DEPRECATED.items():
        if options.get(name) not in (None, False):
            log.warning("--%s is deprecated and does nothing: %s", name.replace("_", "-"), instead)
    for name in FOR_THE_IMAGE:
        if options.get(name) not in (None, False):
            log.info("--%s: the VM image's init starts the browser", name.replace("_", "-"))
    if options.get("terminals_folder") is None:
        options.pop("terminals_folder", None)
    config = DaemonConfig(
        auth_token=token,
        auth_token_file=auth_token_file.resolve() if auth_token_file else None,
        workspace=workspace_folder(workspace),
        log_level=log_level,
        rg_path=resolve_rg_path(rg_path),
        **options,
    )
    # As PID 1 (a container's init) a tiny init process reaps orphans; the daemon is its child.
    run_as_init_if_pid1()
    fixed_mmap_threshold()
    asyncio.run(_serve(config))


async def _serve(config: DaemonConfig) -> None:
    from exec_daemon.server import PortUnavailable
    from exec_daemon.server import serve as serve_daemon

    try:
        await serve_daemon(config)
    except PortUnavailable as exc:
        raise click.ClickException(str(exc)) from None


@main.command(short_help="Run environment.json's install command.")
@click.option(
    "--workspace",
    type=click.Path(path_type=Path),
    default=None,
    help="The workspace root (default: the current directory).",
)
def install(workspace: Path | None) -> None:
    """Run the `install` command of <workspace>/.cursor/environment.json; exit with its code."""
    from exec_daemon.terminals.environment import run_install

    sys.exit(run_install(workspace_folder(workspace)))


@main.command("generate-token")
def generate_token() -> None:
    """Print a fresh random token (64 hex characters)."""
    click.echo(secrets.token_hex(32))


@main.command(short_help="Exit 0 when the daemon answers a Ping.")
@click.option(
    "--url",
    default=f"http://127.0.0.1:{DEFAULT_PORT}",
    show_default=True,
    help="The daemon's RPC address (http:// when no scheme is given).",
)
@click.option(
    "--token",
    envvar="EXEC_DAEMON_AUTH_TOKEN",
    required=True,
    help="Its bearer token (or EXEC_DAEMON_AUTH_TOKEN).",
)
@click.option("--timeout", type=float, default=5.0, show_default=True, help="Seconds to wait.")
def ping(url: str, token: str, timeout: float) -> None:
    """Exit 0 when the daemon answers a Ping (health checks), printing its answer as JSON."""
    url = with_scheme(url)
    from connectrpc.errors import ConnectError
    from google.protobuf.json_format import MessageToDict

    from exec_daemon.client import ExecDaemonClient

    async def ping_once() -> Any:
        async with ExecDaemonClient(url, token, timeout_ms=int(timeout * 1000)) as client:
            return await asyncio.wait_for(client.ping(), timeout)

    try:
        answer = asyncio.run(ping_once())
    except ConnectError as exc:
        click.echo(f"exec-daemon ping: {url}: {exc.code.value}: {exc.message}", err=True)
        sys.exit(1)
    except Exception as exc:
        click.echo(f"exec-daemon ping: {url}: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
    click.echo(json.dumps(MessageToDict(answer)))


if __name__ == "__main__":
    main()
