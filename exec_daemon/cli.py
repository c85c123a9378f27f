"""`exec-daemon serve` and friends."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import logging
import os
import re
import secrets
import shutil
import sys
import threading
from collections.abc import Callable
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
    DEFAULT_LANGUAGE_SERVER_IDLE_MINUTES,
    DEFAULT_LANGUAGE_SERVER_MEMORY_MB,
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
from exec_daemon.kernel.state_root import default_record_folder, new_state_root
from exec_daemon.rpc.cors import parse_origin
from exec_daemon.telemetry.logs import LOG_FORMATS, formatter

log = logging.getLogger("exec_daemon")

# Accepted (the orchestrator passes them) and ignored: the seed deprecates them.
DEPRECATED = {"cursor_self_control_enabled": "use computer_use (CUA-based testing)"}
# Also acted on by the VM image's init (scripts/image/desktop-init starts the desktop's browser);
# the daemon's own use of them is the browserUse subagent (tools/browser.py).
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


def record_folder(
    record: bool, folder: Path | None, workspace: Path, state_base: Path | None
) -> Path | None:
    """Where the session record is kept (--record, --record-folder; by default beside the
    instances' state roots, under --state-base when given), or None."""
    if folder is not None:
        return folder.absolute()
    return default_record_folder(workspace, state_base) if record else None


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
@click.option(
    "--browser-enabled",
    is_flag=True,
    help="The browserUse subagent (Task): a headless Chromium the daemon starts, driven through "
    "the DevTools protocol (the VM image's init also starts the desktop's browser).",
)
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
@click.option(
    "--chrome-executable-path",
    default=None,
    help="The Chromium or Chrome the browserUse subagent starts (default: chromium on PATH).",
)
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
    "--state-base",
    type=click.Path(path_type=Path),
    default=None,
    show_default="/run/exec-daemon as root, else $XDG_RUNTIME_DIR/exec-daemon or "
    "~/.local/state/exec-daemon",
    help="The folder holding every daemon instance's private state root (a `<pid>-<random>` "
    "folder each). A daemon starting ends what the daemons killed on the same base left running "
    "(their tmux server, shells, jobs) and removes their state. It must be writable by the "
    "daemon's user only, as must every folder above it.",
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
    "--language-servers/--no-language-servers",
    "language_servers_enabled",
    default=True,
    show_default=True,
    help="read_lints asks warm language servers (pyright, typescript-language-server, "
    "bash-language-server, and those the workspace's .helix/languages.toml names); off: "
    "command-line linters only.",
)
@click.option(
    "--language-server-idle-minutes",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_LANGUAGE_SERVER_IDLE_MINUTES,
    show_default=True,
    help="A language server read_lints has not used for this long is stopped.",
)
@click.option(
    "--language-server-memory-mb",
    type=click.IntRange(min=64),
    default=DEFAULT_LANGUAGE_SERVER_MEMORY_MB,
    show_default=True,
    help="Resident memory a language server (with its children) may use before it is stopped.",
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
@click.option(
    "--record",
    is_flag=True,
    help="Keep the session record (every call, guard decision, terminal byte, edit and "
    "connection; ControlService.GetSessionRecord, `exec-daemon record export`, /record on the "
    "PTY port) in the workspace's private folder beside the state roots, which outlives "
    "restarts.",
)
@click.option(
    "--record-folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the session record in this folder (implies --record; made 0700, every ancestor "
    "checked like the state root's).",
)
@click.option(
    "--record-max-bytes",
    type=click.IntRange(min=1 << 20),
    default=256 << 20,
    show_default=True,
    help="The session record's size on disk, at most: the oldest entries are dropped (and "
    "counted in a `dropped` entry) beyond it.",
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
            log.info(
                "--%s: the VM image's init starts the browser; the browserUse subagent "
                "starts its own",
                name.replace("_", "-"),
            )
    if options.get("terminals_folder") is None:
        options.pop("terminals_folder", None)
    state_base = options.pop("state_base", None)
    base = state_base.absolute() if state_base is not None else None
    if base is not None:
        options["state_root"] = new_state_root(base)
    root = workspace_folder(workspace)
    options["record_folder"] = record_folder(
        options.pop("record"), options["record_folder"], root, base
    )
    config = DaemonConfig(
        auth_token=token,
        auth_token_file=auth_token_file.resolve() if auth_token_file else None,
        workspace=root,
        log_level=log_level,
        rg_path=resolve_rg_path(rg_path),
        **options,
    )
    # As PID 1 (a container's init) a tiny init process reaps orphans; the daemon is its child.
    run_as_init_if_pid1()
    fixed_mmap_threshold()
    # Start-up (importing the server's modules above all) makes ~100k objects that live as long
    # as the daemon and leaves almost no cyclic garbage, yet the collector ran ~150 times over
    # them (a tenth of start-up's CPU). The server enables it again when it serves
    # (exec_daemon/server.py: freeze_start_up_objects).
    gc.disable()
    asyncio.run(_serve(config))
    exit_now_if_threads_overstay()


def exit_now_if_threads_overstay() -> None:
    """Ends the process at once, without the interpreter's finalization, when threads are
    still running after serving ended: telemetry's exports to a collector that never answers
    are left behind after their bound (exec_daemon/telemetry/tracing.py), and finalizing the
    interpreter under a thread busy in OpenSSL crashed the daemon once (SIGSEGV) under load.
    Everything the daemon owns was released when serving ended."""
    if threading.active_count() > 1:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


async def _serve(config: DaemonConfig) -> None:
    from exec_daemon.rpc.ports import PortUnavailable
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


def client_options(command: Callable[..., None]) -> Callable[..., None]:
    """--url and --token, shared by the subcommands that talk to a running daemon."""
    command = click.option(
        "--token",
        default=None,
        help="Its bearer token; by default EXEC_DAEMON_AUTH_TOKEN, else the .exec-daemon-token "
        "file ./scripts/serve keeps (in the current folder or one above it).",
    )(command)
    return click.option(
        "--url",
        default=f"http://127.0.0.1:{DEFAULT_PORT}",
        show_default=True,
        help="The daemon's RPC address (http:// when no scheme is given).",
    )(command)


def client_token(command: str, url: str, token: str | None) -> str:
    """The token as the SDK finds it; none found ends the command with one line (exit 1)."""
    from exec_daemon.client import TokenNotFound, find_token

    try:
        return find_token(token)
    except TokenNotFound as exc:
        click.echo(f"exec-daemon {command}: {url}: {exc}", err=True)
        sys.exit(1)


@main.command(short_help="Exit 0 when the daemon answers a Ping.")
@client_options
@click.option("--timeout", type=float, default=5.0, show_default=True, help="Seconds to wait.")
def ping(url: str, token: str | None, timeout: float) -> None:
    """Exit 0 when the daemon answers a Ping (health checks), printing its answer as JSON."""
    url = with_scheme(url)
    token = client_token("ping", url, token)
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


def env_option(values: tuple[str, ...]) -> dict[str, str]:
    """--env NAME=VALUE (repeatable)."""
    env: dict[str, str] = {}
    for value in values:
        name, equals, text = value.partition("=")
        if not equals or not name:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE")
        env[name] = text
    return env


@main.command("run", short_help="Run a shell command on the daemon; exit with its code.")
@client_options
@click.option("--cwd", default=None, help="The directory to run in (relative to the workspace).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.001, max=600),
    default=600.0,
    show_default=True,
    help="Seconds before the command is ended (then the exit code is 124).",
)
@click.option(
    "--env",
    multiple=True,
    metavar="NAME=VALUE",
    callback=lambda _ctx, _param, value: env_option(value),
    help="A variable for this command only (repeatable).",
)
@click.option(
    "--run-mode",
    type=click.Choice(RUN_MODES),
    default=None,
    help="The call's run mode (default: the daemon's --run-mode).",
)
@click.argument("command", nargs=-1, required=True)
def run_command(
    url: str,
    token: str | None,
    cwd: str | None,
    timeout: float,
    env: dict[str, str],
    run_mode: str | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND (words joined by spaces, as ssh does) in the agent's shell session on the
    daemon, streaming its stdout and stderr here; exit with its exit code (124: timed out;
    125: the daemon refused or failed the call, or could not be reached, saying why)."""
    url = with_scheme(url)
    token = client_token("run", url, token)
    from exec_daemon.console import DAEMON_FAILED, INTERRUPTED
    from exec_daemon.console import run_command as run_on_daemon
    from exec_daemon.sdk import AsyncSandbox, ExecDaemonError

    async def run_once() -> int:
        async with AsyncSandbox(url, token) as sandbox:
            return await run_on_daemon(
                sandbox,
                " ".join(command),
                cwd=cwd,
                timeout_seconds=timeout,
                env=env,
                run_mode=run_mode,
            )

    try:
        code = asyncio.run(run_once())
    except KeyboardInterrupt:
        code = INTERRUPTED
    except ExecDaemonError as exc:
        click.echo(f"exec-daemon run: {exc.code}: {exc.message}", err=True)
        code = DAEMON_FAILED
    sys.exit(code)


@main.command(short_help="Open a terminal of the daemon in this console.")
@client_options
@click.option(
    "--pty-url",
    default=None,
    help="The daemon's PTY WebSocket server (default: ws:// on the --url port + 1).",
)
@click.option(
    "--terminal",
    "terminal_id",
    default=None,
    help="Attach to this running terminal (its output replayed) instead of opening one.",
)
@click.option(
    "--command",
    default=None,
    help="What a new terminal runs (default: the login shell, in the workspace).",
)
@click.option("--cwd", default=None, help="A new terminal's directory.")
def attach(
    url: str,
    token: str | None,
    pty_url: str | None,
    terminal_id: str | None,
    command: str | None,
    cwd: str | None,
) -> None:
    """Open a terminal on the daemon (or attach to one) with this console as its screen and
    keyboard, sized as this console and resized with it. Exit with its process's exit code
    once it ends; Ctrl-] detaches, leaving it running."""
    url = with_scheme(url)
    token = client_token("attach", url, token)
    from exec_daemon.console import DAEMON_FAILED, attach_console, console_size, raw_mode
    from exec_daemon.sdk import AsyncSandbox, ExecDaemonError

    stdin_fd, stdout_fd = sys.stdin.fileno(), sys.stdout.fileno()

    async def attach_once() -> int:
        async with AsyncSandbox(url, token, pty_url=pty_url) as sandbox:
            columns, rows = console_size(stdout_fd)
            if terminal_id is None:
                terminal = await sandbox.terminals.open(command, cwd=cwd, cols=columns, rows=rows)
            else:
                terminal = await sandbox.terminals.attach(terminal_id)
                await terminal.resize(columns, rows)
            with raw_mode(stdin_fd):
                detached, exit_code = await attach_console(terminal, stdin_fd, stdout_fd)
            await terminal.close()
        if detached:
            click.echo(
                f"exec-daemon attach: detached; terminal {terminal.id} keeps running "
                f"(exec-daemon attach --terminal {terminal.id})",
                err=True,
            )
            return 0
        if exit_code is None:
            click.echo("exec-daemon attach: the connection ended", err=True)
            return DAEMON_FAILED
        return exit_code

    try:
        code = asyncio.run(attach_once())
    except ExecDaemonError as exc:
        click.echo(f"exec-daemon attach: {exc.code}: {exc.message}", err=True)
        code = DAEMON_FAILED
    sys.exit(code)


@main.group()
def record() -> None:
    """The session record of a daemon serving with --record."""


@record.command("export", short_help="Write the session record to one file.")
@client_options
@click.option("--agent-id", default="", help="Only this agent and its subagents (default: all).")
@click.option("--since", type=click.IntRange(min=0), default=0, help="Only entries after this seq.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The file written: one JSON entry a line (a `cast` entry's `asciicast` field is an "
    "asciicast v2 recording: `jq -r .asciicast`).",
)
def record_export(url: str, token: str | None, agent_id: str, since: int, output: Path) -> None:
    """Write the entries of ControlService.GetSessionRecord to OUTPUT, oldest first."""
    url = with_scheme(url)
    found = client_token("record export", url, token)
    from connectrpc.errors import ConnectError

    from exec_daemon.client import ExecDaemonClient

    async def export() -> int:
        written = 0
        async with ExecDaemonClient(url, found) as client:
            with output.open("w", encoding="utf-8") as out:
                async for entry in client.session_record(agent_id, since):
                    out.write(entry.json + "\n")
                    written += 1
        return written

    try:
        written = asyncio.run(export())
    except ConnectError as exc:
        click.echo(f"exec-daemon record export: {url}: {exc.code.value}: {exc.message}", err=True)
        sys.exit(1)
    except OSError as exc:
        click.echo(f"exec-daemon record export: {exc}", err=True)
        sys.exit(1)
    click.echo(f"{written} entries written to {output}")


if __name__ == "__main__":
    main()
