"""The daemon's own secrets, kept out of the environment of every process it starts.

The auth token lets whoever holds it run anything through the daemon, unconfined; the trace
token and a model API key are the operator's. Variables are dropped by name and, for values the
daemon registered at start (`keep_secret`), by value, whatever name they were given.
"""

from __future__ import annotations

from collections.abc import Mapping

AUTH_TOKEN_VARIABLE = "EXEC_DAEMON_AUTH_TOKEN"
TRACE_TOKEN_VARIABLE = "EXEC_DAEMON_TRACE_AUTH_TOKEN"
MODEL_API_KEY_VARIABLE = "EXEC_DAEMON_MODEL_API_KEY"
SECRET_VARIABLES = frozenset(
    {
        AUTH_TOKEN_VARIABLE,
        TRACE_TOKEN_VARIABLE,
        MODEL_API_KEY_VARIABLE,
        "CURSOR_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
    }
)
# Shorter values would also match unrelated variables; no real token is this short.
_MIN_SECRET_CHARS = 8
_secret_values: set[str] = set()


def keep_secret(value: str | None) -> None:
    """Registers a value no child may see, under any variable name."""
    if value and len(value) >= _MIN_SECRET_CHARS:
        _secret_values.add(value)


def registered_secrets() -> frozenset[str]:
    """The values `keep_secret` registered (redaction masks them in everything sent out)."""
    return frozenset(_secret_values)


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` minus the daemon's secrets (by name, and any variable holding a registered value)."""
    return {
        name: value
        for name, value in env.items()
        if name not in SECRET_VARIABLES and not any(secret in value for secret in _secret_values)
    }
