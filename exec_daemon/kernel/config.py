"""The daemon's settings, filled from the `serve` command line."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from exec_daemon.kernel.state_root import new_state_root

DEFAULT_PORT = 8080
DEFAULT_PTY_WEBSOCKET_PORT = 8081
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_HEARTBEAT_SECONDS = 15.0
DEFAULT_IDE_PORT = 8082
DEFAULT_BROWSER_SESSION_SECONDS = 3600.0
DEFAULT_HEADER_TIMEOUT_SECONDS = 30.0
# Where code-server is installed and keeps its state (exec_daemon/rpc/ide.py); the daemon's own.
DEFAULT_IDE_FOLDER = Path.home() / ".cache" / "exec-daemon" / "ide"
# How much a tool call may do without approval (docs: Run Modes); a call may ask for another.
RUN_MODES = ("run_everything", "allowlist", "auto_review")
DEFAULT_IMAGE_MODEL = "gpt-image-1"
DEFAULT_SUBAGENT_MAX_STEPS = 40
DEFAULT_SUBAGENT_MAX_TOKENS = 400_000
DEFAULT_QUESTION_TIMEOUT_SECONDS = 1800.0
DEFAULT_LANGUAGE_SERVER_IDLE_MINUTES = 15.0
DEFAULT_LANGUAGE_SERVER_MEMORY_MB = 2048
# A Path field left to its default (resolved in __post_init__).
UNSET_PATH = Path()


def default_build_cache_folder() -> Path:
    """Per user: a folder another user made first (0700, theirs) would turn the caches off."""
    return Path(f"/tmp/exec-daemon-build-caches-{os.getuid()}")


@dataclass(frozen=True)
class DaemonConfig:
    auth_token: str
    workspace: Path
    # Where the token was read from (--auth-token-file): a secret path the file tools refuse.
    auth_token_file: Path | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    pty_websocket_port: int = DEFAULT_PTY_WEBSOCKET_PORT
    log_level: str = "info"
    rg_path: str = "rg"
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # Idle streams get a heartbeat this often; a peer silent for 3 intervals is taken as dead.
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    # Responses are not compressed unless asked for: gzip costs far more CPU than the loopback
    # or datacenter link saves (design.md). Compressed requests are always accepted.
    compress_responses: bool = False
    browser_enabled: bool = False
    cursor_self_control_enabled: bool = False
    mcp_config: str | None = None
    mcp_oauth_server_urls: str | None = None
    http_mcp_tools_file: str | None = None
    cloud_rules_enabled: bool = False
    computer_use_enabled: bool = False
    secret_redaction_enabled: bool = False
    # One of RUN_MODES. Cloud agents pre-approve most tools, hence run_everything by default.
    run_mode: str = "run_everything"
    chrome_executable_path: str | None = None
    record_screen_enabled: bool = False
    # Computer use waits this long before each screenshot, for the UI to settle.
    screenshot_delay_ms: int = 2000
    generate_image_enabled: bool = False
    sandbox_enabled: bool = False
    sandbox_helper_path: str | None = None
    claude_md_enabled: bool = True
    trace_endpoint: str | None = None
    trace_auth_token: str | None = None
    ghost_mode: bool = True
    trace_insecure: bool = False
    # Networks (CIDR texts) fetch/web_fetch may reach although not public; none by default.
    fetch_allow_private: tuple[str, ...] = ()
    # This daemon instance's private folder (exec_daemon/kernel/state_root.py).
    state_root: Path = field(default_factory=new_state_root)
    # The session record's folder (exec_daemon/telemetry/session_record.py); None: no record.
    record_folder: Path | None = None
    record_max_bytes: int = 256 * 1024 * 1024
    # Where background shells and terminals write their output (the agent can read it back);
    # `<state_root>/terminals` unless given.
    terminals_folder: Path = UNSET_PATH
    artifacts_folder: Path = field(default_factory=lambda: Path("/opt/cursor/artifacts"))
    # Origins (scheme://host[:port]) whose web pages may call the RPC port from a browser.
    cors_allowed_origins: tuple[str, ...] = ()
    # The build caches sandboxed commands share (npm, pip, uv, cargo, go, gradle: sandbox/caches.py).
    sandbox_build_cache_folder: Path = field(default_factory=lambda: default_build_cache_folder())
    # Model-backed tools (tools/models.py): an OpenAI-compatible endpoint and its key.
    model_endpoint: str | None = None
    model_api_key: str | None = None
    model: str | None = None
    fast_model: str | None = None
    image_model: str = DEFAULT_IMAGE_MODEL
    # A SearXNG-compatible JSON search API (web_search).
    web_search_endpoint: str | None = None
    # Bounds of every subagent loop (Task): model turns, and tokens in and out.
    subagent_max_steps: int = DEFAULT_SUBAGENT_MAX_STEPS
    subagent_max_tokens: int = DEFAULT_SUBAGENT_MAX_TOKENS
    # How long ask_question waits for AnswerQuestion.
    question_timeout_seconds: float = DEFAULT_QUESTION_TIMEOUT_SECONDS
    # read_lints's language servers (tools/language_servers.py): on, idle stop, memory cap.
    language_servers_enabled: bool = True
    language_server_idle_minutes: float = DEFAULT_LANGUAGE_SERVER_IDLE_MINUTES
    language_server_memory_mb: int = DEFAULT_LANGUAGE_SERVER_MEMORY_MB
    # The browser IDE: the token-checking proxy's port (0: off) and code-server's folder.
    ide_port: int = DEFAULT_IDE_PORT
    ide_folder: Path = field(default_factory=lambda: DEFAULT_IDE_FOLDER)
    # The desktop page (noVNC behind the token) and the VNC server it bridges to; 0: no page.
    novnc_port: int = 0
    vnc_address: str = "127.0.0.1:5901"
    # A warm pool's daemon (exec_daemon/rpc/pool.py): `auth_token` is the pool's credential
    # until InitSandbox gives the agent's own.
    wait_for_init: bool = False
    # After SIGTERM (readiness already 503), calls in flight may finish for this long.
    drain_grace_seconds: float = 0.0
    # A second header that may carry the token (routers that strip Authorization).
    auth_header: str | None = None
    # A connection of the RPC port that has not sent a whole request within this long is closed.
    header_timeout_seconds: float = DEFAULT_HEADER_TIMEOUT_SECONDS
    # How long the desktop's and the IDE's sign-in cookies last (refreshed while in use).
    browser_session_seconds: float = DEFAULT_BROWSER_SESSION_SECONDS

    def __post_init__(self) -> None:
        if self.terminals_folder == UNSET_PATH:
            object.__setattr__(self, "terminals_folder", self.state_root / "terminals")

    def own_ports(self) -> dict[int, str]:
        """The daemon's own listening ports (those in use), by what each serves; with the
        desktop page, the VNC server it bridges to (loopback, no password) too."""
        vnc = self.vnc_address.rpartition(":")[2]
        named = [
            (self.port, "RPC"),
            (self.pty_websocket_port, "PTY WebSocket"),
            (self.novnc_port, "desktop page (noVNC)"),
            (int(vnc) if vnc.isdigit() and self.novnc_port else 0, "VNC"),
            (self.ide_port, "browser IDE"),
        ]
        return {port: what for port, what in named if port}


def off_without(feature: str, flag: str) -> str:
    """What a tool whose `feature` is gated by `flag` answers when the daemon runs without it."""
    return f"{feature} is off: the daemon runs without {flag}"
